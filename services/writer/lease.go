package writer

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// leaseMark is this process's last renewal of a session's lease.
type leaseMark struct {
	holder string
	at     time.Time
}

// renewTimeout bounds a renewal done on the way to an append's reply;
// checkTimeout the lease read before an append.
const (
	renewTimeout = 2 * time.Second
	checkTimeout = time.Second
)

// checkHolder refuses, before anything is stored, an append that names a
// holder other than the one whose lease is live, unless it says takeover
// (DESIGN.md section 2). It reads nothing while this process renewed the
// lease for the same holder within the last TTL/3 (the appends that skip
// their renewal): the common case costs no request. Otherwise it reads the
// lease from the bucket's leader, at most once per TTL/3 per session as the
// renewal after the append marks it again. A takeover through another
// writer replica within that TTL/3 is noticed at the next renewal, which
// is refused; the append's expectedSeq check is what keeps a stale holder
// from building on a log it no longer knows.
//
// A lease that cannot be read (the lease bucket has no leader) does not
// stop the append: nobody can take a lease over while the bucket cannot be
// written either, and appends must not depend on the lease bucket being up.
func (s *Service) checkHolder(ctx context.Context, req *AppendRequest) error {
	if req.Holder == "" || req.Takeover {
		return nil
	}
	now := s.cfg.Now()
	m, marked := s.leases.Get(req.SessionID)
	ours := marked && m.holder == req.Holder
	if ours && now.Sub(m.at) < s.cfg.LeaseTTL/3 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	rec, err := s.st.LeaseRecord(ctx, req.SessionID)
	if err != nil {
		s.m.renewals.WithLabelValues("unchecked").Inc()
		s.log.Debug("writer: lease not checked", "session", req.SessionID, "holder", req.Holder, "err", err)
		return nil
	}
	if held := logstore.HeldByOther(req.SessionID, rec, req.Holder, now); held != nil {
		if ours {
			s.leases.Remove(req.SessionID)
		}
		s.m.renewals.WithLabelValues("held").Inc()
		return held
	}
	return nil
}

// renewAfterAppend renews the holder's lease after a committed append, at
// most every third of the TTL per session, and always when the holder is
// new to this process. A renewal that fails does not fail the append (it
// is stored): it is logged and counted, and the next append tries again.
// Without takeover it never takes a live lease from another holder (one
// that took it between checkHolder and the commit keeps it).
func (s *Service) renewAfterAppend(ctx context.Context, sessionID, holder string, takeover bool) {
	now := s.cfg.Now()
	if m, ok := s.leases.Get(sessionID); ok && m.holder == holder && now.Sub(m.at) < s.cfg.LeaseTTL/3 {
		return
	}
	// Mark first so concurrent appends of the session do not all renew.
	s.leases.Add(sessionID, leaseMark{holder: holder, at: now})
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	if err := s.st.TakeLease(ctx, sessionID, holder, now, takeover); err != nil {
		s.leases.Remove(sessionID)
		var held *logstore.LeaseHeldError
		if errors.As(err, &held) {
			s.m.renewals.WithLabelValues("held").Inc()
			s.log.Warn("writer: lease taken by another holder during a committed append", "session", sessionID, "holder", holder, "current", held.Holder)
			return
		}
		s.m.renewals.WithLabelValues("error").Inc()
		s.log.Warn("writer: lease renewal failed after a committed append", "session", sessionID, "holder", holder, "err", err)
		// The session holds the holder's events now: if the holder dies
		// before another append or heartbeat gets through, only a claim
		// lets the repairer find it. This writer owes it.
		s.owed.Add(sessionID, holder)
		return
	}
	s.owed.Remove(sessionID)
	s.m.renewals.WithLabelValues("ok").Inc()
}

// owedLoop writes, every third of the lease TTL until ctx ends, the claims
// of sessions whose lease renewal failed after a committed append (the
// lease or claim bucket unavailable): a holder that died then, its work
// open, would otherwise never be repaired (DESIGN.md section 6: the
// repairer closes what claimed sessions left open). A claim already there
// is kept; the repairer counts the lease a claim alone stands for as
// running out a TTL after the claim.
func (s *Service) owedLoop(ctx context.Context) {
	t := time.NewTicker(max(s.cfg.LeaseTTL/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range s.owed.Keys() {
			holder, ok := s.owed.Peek(id)
			if !ok {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, renewTimeout)
			err := s.st.EnsureClaim(cctx, id, holder, s.cfg.Now())
			cancel()
			if err != nil {
				s.log.Debug("writer: owed claim not written yet", "session", id, "err", err)
				break // the bucket is still unavailable: next tick
			}
			s.owed.Remove(id)
		}
	}
}

// heartbeatMin is the shortest interval between two renewals a heartbeat
// causes for the same holder: heartbeats are the agent's explicit liveness
// signal and normally come every TTL/3, so each one renews; this floor only
// keeps a heartbeat loop that spins from turning into a KV write storm.
func (s *Service) heartbeatMin() time.Duration { return s.cfg.LeaseTTL / 10 }

func (s *Service) handleHeartbeat(ctx context.Context, m *nats.Msg) {
	var rep HeartbeatReply
	caller, err := api.CallerOf(m.Header.Values(api.RequestInfoHeader))
	if err == nil {
		rep, err = s.HeartbeatAs(ctx, caller, m.Data)
	}
	if err != nil {
		d := errorDetail(err)
		s.m.heartbeats.WithLabelValues(string(d.Code)).Inc()
		s.respondErr(m.Reply, d)
		return
	}
	s.m.heartbeats.WithLabelValues("ok").Inc()
	body := []byte(`{"sessionId":"` + rep.SessionID + `","holder":"` + rep.Holder + `","ttlMs":` + itoa(rep.TTLMs) + `}`)
	s.respond(m.Reply, body)
}

// Heartbeat renews the holder's lease of an existing session. The reply's
// ttlMs is how long the lease lasts from now. A live lease of another
// holder is refused with conflict (naming it) unless the request says
// takeover.
func (s *Service) Heartbeat(ctx context.Context, body []byte) (HeartbeatReply, error) {
	return s.HeartbeatAs(ctx, api.Caller{}, body)
}

// HeartbeatAs is Heartbeat for a requester the NATS server named: an
// agent renews only the lease of a session it owns or was granted.
func (s *Service) HeartbeatAs(ctx context.Context, caller api.Caller, body []byte) (rep HeartbeatReply, err error) {
	var req HeartbeatRequest
	if err := unmarshal(body, &req); err != nil {
		return HeartbeatReply{}, schema.Errorf(schema.CodeBadRequest, "request is not a valid heartbeat request: %v", err)
	}
	if req.SessionID == "" {
		return HeartbeatReply{}, schema.Errorf(schema.CodeBadRequest, "sessionId is required")
	}
	if err := logstore.ValidateSessionID(req.SessionID); err != nil {
		return HeartbeatReply{}, err
	}
	if req.Holder == "" || !schema.ValidItemID(req.Holder) {
		return HeartbeatReply{}, schema.Errorf(schema.CodeBadRequest, "holder is required and must match ^[A-Za-z0-9_.:-]{1,128}$")
	}
	if !caller.Operator() {
		if req.SessionID, err = caller.StoredID(req.SessionID); err != nil {
			return HeartbeatReply{}, err
		}
		defer func() {
			rep.SessionID = caller.WireID(rep.SessionID)
			err = askedError(err, caller)
		}()
		if err := s.authorize(ctx, caller, req.SessionID); err != nil {
			return HeartbeatReply{}, err
		}
	}
	exists := false
	if e, ok := s.cache.Get(req.SessionID); ok {
		mu := s.lock(req.SessionID)
		mu.Lock()
		exists = e.state.Exists()
		mu.Unlock()
	}
	if !exists {
		t, err := s.st.Tail(ctx, req.SessionID)
		if err != nil {
			return HeartbeatReply{}, schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
		}
		if !t.Exists() {
			return HeartbeatReply{}, schema.Errorf(schema.CodeNotFound, "session %s does not exist", req.SessionID)
		}
	}
	now := s.cfg.Now()
	ttl := s.cfg.LeaseTTL
	m, marked := s.leases.Get(req.SessionID)
	if marked && m.holder == req.Holder && now.Sub(m.at) < s.heartbeatMin() {
		return HeartbeatReply{SessionID: req.SessionID, Holder: req.Holder, TTLMs: (ttl - now.Sub(m.at)).Milliseconds()}, nil
	}
	if err := s.st.TakeLease(ctx, req.SessionID, req.Holder, now, req.Takeover); err != nil {
		var held *logstore.LeaseHeldError
		if errors.As(err, &held) {
			if marked && m.holder == req.Holder {
				s.leases.Remove(req.SessionID)
			}
			s.m.renewals.WithLabelValues("held").Inc()
			return HeartbeatReply{}, err
		}
		s.m.renewals.WithLabelValues("error").Inc()
		var se *schema.Error
		if errors.As(err, &se) {
			return HeartbeatReply{}, err
		}
		return HeartbeatReply{}, schema.Errorf(schema.CodeNotCommitted, "lease not renewed: %v", err)
	}
	s.m.renewals.WithLabelValues("ok").Inc()
	s.leases.Add(req.SessionID, leaseMark{holder: req.Holder, at: now})
	return HeartbeatReply{SessionID: req.SessionID, Holder: req.Holder, TTLMs: ttl.Milliseconds()}, nil
}
