package writer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

func (s *Service) handleAppend(ctx context.Context, m *nats.Msg) {
	start := time.Now()
	var rep AppendReply
	caller, err := api.CallerOf(m.Header.Values(api.RequestInfoHeader))
	if err == nil {
		rep, err = s.AppendAs(ctx, caller, m.Data)
	}
	outcome, code := "committed", "ok"
	switch {
	case err != nil:
		d := errorDetail(err)
		outcome, code = "refused", string(d.Code)
		if d.Code == schema.CodeOutcomeUnknown {
			outcome = "unknown"
		}
		s.respondErr(m.Reply, d)
	default:
		if rep.Duplicate {
			outcome = "duplicate"
		}
		s.respond(m.Reply, encodeOK(rep))
	}
	s.m.appends.WithLabelValues(outcome, code).Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
}

// Append handles one append request body and returns the reply or a
// contract error (*schema.Error). It is what the endpoint runs; tests and
// benchmarks may call it directly.
func (s *Service) Append(ctx context.Context, body []byte) (AppendReply, error) {
	return s.AppendAs(ctx, api.Caller{}, body)
}

// AppendAs is Append for a requester the NATS server named (ADR 010): an
// agent's session/created records it as the owner, and an agent may
// append only to a session it owns or was granted.
func (s *Service) AppendAs(ctx context.Context, caller api.Caller, body []byte) (_ AppendReply, err error) {
	var req AppendRequest
	var bodies [][]byte
	if err := decodeAppendBodies(body, &req, &bodies); err != nil {
		return AppendReply{}, schema.Errorf(schema.CodeBadRequest, "request is not a valid append request: %v", err)
	}
	kept, seqs := keepBodies(req.Events, bodies)
	if !caller.Operator() {
		if err := scopeAppend(caller, &req); err != nil {
			return AppendReply{}, err
		}
		defer func() { err = askedError(err, caller) }()
		if caller.Scoped() {
			kept, seqs = nil, nil // the events' session ids change
		}
	}
	p, err := s.prepare(&req)
	if err != nil {
		return AppendReply{}, err
	}
	p.bodies, p.seqs = kept, seqs
	p.caller = caller
	if !caller.Operator() {
		if err := stampOwner(caller, &req, &p); err != nil {
			return AppendReply{}, err
		}
	}
	if err := checkOwners(&req); err != nil {
		return AppendReply{}, err
	}
	if !caller.Operator() {
		if err := s.quotas.take(caller.Tenant, len(req.Events)); err != nil {
			return AppendReply{}, err
		}
		if err := s.usage.checkBytes(logstore.UsageTenant(req.SessionID), p.requestBytes(req.Events)); err != nil {
			return AppendReply{}, err
		}
	}
	if err := s.checkHolder(ctx, &req); err != nil {
		return AppendReply{}, err
	}
	mu := s.lock(req.SessionID)
	mu.Lock()
	rep, err := s.commit(ctx, &req, p)
	mu.Unlock()
	if err != nil {
		return AppendReply{}, err
	}
	if req.Holder != "" {
		s.renewAfterAppend(ctx, req.SessionID, req.Holder, req.Takeover)
	}
	if !caller.Operator() && !rep.Duplicate {
		s.quotas.stored(caller.Tenant, len(req.Events))
	}
	rep.SessionID = caller.WireID(rep.SessionID)
	return rep, nil
}

// scopeAppend gives an agent's request the stored id of the session it
// names (api.Caller.StoredID), in the request and its events.
func scopeAppend(c api.Caller, req *AppendRequest) error {
	wire := req.SessionID
	stored, err := c.StoredID(wire)
	if err != nil || !c.Scoped() {
		return err
	}
	req.SessionID = stored
	for i := range req.Events {
		if req.Events[i].SessionID == wire {
			req.Events[i].SessionID = stored
		}
	}
	return nil
}

// prepared is what prepare learned of a request.
type prepared struct {
	// expected is the required last seq (nil: after the tail).
	expected *uint64
	// bodies are the events' bodies as the client encoded them, each
	// exactly schema.Encode's for the event as it was decoded, with seqs
	// the seq each one holds; nil unless every event came so.
	bodies [][]byte
	seqs   []uint64
	// caller is who asked (the zero Caller: an operator or a service);
	// grants: the request holds a session/granted event of an agent.
	caller api.Caller
	grants bool
}

// stampOwner records an agent's identity in the session/created events of
// its request (data.owner), from what the server said, never the request,
// and notes a session/granted event (which only the owner may write).
func stampOwner(c api.Caller, req *AppendRequest, p *prepared) error {
	for i := range req.Events {
		e := &req.Events[i]
		p.grants = p.grants || e.Type == schema.TypeSessionGranted
		if e.Type != schema.TypeSessionCreated {
			continue
		}
		data, err := api.StampOwner(c, e.Data)
		if err != nil {
			var se *schema.Error
			if errors.As(err, &se) {
				return se.WithIndex(i)
			}
			return err
		}
		e.Data = data
		// The client's bodies no longer hold the events to store.
		p.bodies, p.seqs = nil, nil
	}
	return nil
}

// keepBodies returns the client's bodies of events, and the seq each one
// holds, when every event is canonical and prepare will leave it as it
// was decoded: prepare fills in only what a canonical body cannot lack,
// but the zero time and the empty event id, which it replaces. Else nil.
func keepBodies(events []schema.Envelope, bodies [][]byte) ([][]byte, []uint64) {
	if len(bodies) != len(events) {
		return nil, nil
	}
	seqs := make([]uint64, len(events))
	for i := range events {
		if bodies[i] == nil || events[i].Time.IsZero() || events[i].EventID == "" {
			return nil, nil
		}
		seqs[i] = events[i].Seq
	}
	return bodies, seqs
}

// storeBodies is what the store is to write for events: the client's
// bodies when they are still the events' encoding (the seqs check
// assigned are the ones they hold), else nil (the store encodes them).
func (p *prepared) storeBodies(events []schema.Envelope) [][]byte {
	if p.bodies == nil {
		return nil
	}
	for i := range events {
		if events[i].Seq != p.seqs[i] {
			return nil
		}
	}
	return p.bodies
}

// requestBytes is the size of the events' bodies, as the client sent
// them, else of their data alone (less than the store will write): what
// a bound on a tenant's stored bytes is checked with before the append.
func (p *prepared) requestBytes(events []schema.Envelope) int {
	n := 0
	if p.bodies != nil {
		for _, b := range p.bodies {
			n += len(b)
		}
		return n
	}
	for i := range events {
		n += len(events[i].Data)
	}
	return n
}

// prepare checks the request on its own and completes its events (all but
// seq, which depends on the tail).
func (s *Service) prepare(req *AppendRequest) (prepared, error) {
	p := prepared{expected: req.ExpectedSeq}
	if req.SessionID == "" {
		return p, schema.Errorf(schema.CodeBadRequest, "sessionId is required")
	}
	if err := logstore.ValidateSessionID(req.SessionID); err != nil {
		return p, err
	}
	if req.Holder != "" && !schema.ValidItemID(req.Holder) {
		return p, schema.Errorf(schema.CodeBadRequest, "holder must match ^[A-Za-z0-9_.:-]{1,128}$")
	}
	n := len(req.Events)
	if n == 0 {
		return p, schema.Errorf(schema.CodeBadRequest, "events is required: 1 to %d events", schema.MaxBatchEvents)
	}
	if n > schema.MaxBatchEvents {
		return p, schema.Errorf(schema.CodeTooLarge, "%d events, at most %d per append", n, schema.MaxBatchEvents)
	}
	now := s.cfg.Now().UTC()
	var ids map[string]int
	if n > 1 {
		ids = make(map[string]int, n)
	}
	for i := range req.Events {
		e := &req.Events[i]
		bad := func(format string, args ...any) error {
			return schema.Errorf(schema.CodeInvalidEvent, format, args...).WithIndex(i)
		}
		switch e.SchemaVersion {
		case 0:
			e.SchemaVersion = schema.Version
		case schema.Version:
		default:
			return p, bad("schemaVersion %d: this writer accepts only %d", e.SchemaVersion, schema.Version)
		}
		if e.SessionID == "" {
			e.SessionID = req.SessionID
		} else if e.SessionID != req.SessionID {
			return p, bad("sessionId %q differs from the request's", schema.Clip(e.SessionID, 40))
		}
		// A seq in a request is an expectation: the writer assigns seqs,
		// and one given must be the one it would assign.
		if e.Seq != 0 {
			if i == 0 {
				exp := e.Seq - 1
				if p.expected != nil && *p.expected != exp {
					return p, bad("seq %d contradicts expectedSeq %d", e.Seq, *p.expected)
				}
				p.expected = &exp
			} else if prev := req.Events[i-1].Seq; prev == 0 || e.Seq != prev+1 {
				return p, bad("seq %d does not follow the previous event's", e.Seq)
			}
		} else if i > 0 && req.Events[i-1].Seq != 0 {
			return p, bad("seq missing after an event that gave one")
		}
		if e.EventID == "" {
			e.EventID = ulid.Make().String()
		}
		if ids != nil {
			if j, dup := ids[e.EventID]; dup {
				return p, bad("eventId %s repeats event %d's", schema.Clip(e.EventID, 40), j)
			}
			ids[e.EventID] = i
		}
		if e.Time.IsZero() {
			e.Time = now
		}
		// The store encodes each event once and refuses one over its
		// limit (too_large, with the index); Validate encodes only when
		// this writer's limit is lower than the store's.
		if len(e.Data) > s.cfg.MaxEventBytes {
			return p, schema.Errorf(schema.CodeTooLarge, "data is %d bytes, limit %d", len(e.Data), s.cfg.MaxEventBytes).WithIndex(i)
		}
		// decodeAppend checked the whole body (data included) as
		// CheckJSON would: Validate need not scan the data again.
		if err := schema.Validate(e, schema.ValidateOptions{Origin: schema.OriginAgent, MaxEventBytes: s.validateLimit, DataChecked: true}); err != nil {
			var se *schema.Error
			if errors.As(err, &se) {
				return p, se.WithIndex(i)
			}
			return p, bad("%v", err)
		}
		if e.Type == schema.TypeSessionCreated && forkChild(e) {
			// A parent makes the session a fork child, refused until a
			// fork/committed the agent cannot write: only the forker
			// creates children (sessions.api.fork).
			return p, bad("session/created with data.parent is written only by the forker: use %s", logstore.SubjectFork)
		}
	}
	return p, nil
}

// commit runs under the session's lock: load the state, recognize a
// retry, check the expectation and the structure, append.
func (s *Service) commit(ctx context.Context, req *AppendRequest, p prepared) (_ AppendReply, err error) {
	reload := false
	retries, rereads, dups := 0, 0, 0
	// reserved: the session an agent creates is counted in its tenant's
	// usage (usage.go), given back unless stored or perhaps stored.
	tenant := logstore.UsageTenant(req.SessionID)
	reserved, created := false, false
	defer func() {
		if reserved && !created && schema.CodeOf(err) != schema.CodeOutcomeUnknown {
			s.usage.count(tenant, -1, 0)
		}
	}()
	for {
		if err := s.erasingNow(req.SessionID); err != nil {
			return AppendReply{}, err
		}
		ent, fresh, err := s.entryFor(ctx, req.SessionID, reload)
		if err != nil {
			// A session being erased lost its first event: it does not
			// fold, and the answer is erased.
			if rerr := refuseErased(ctx, s.st, req.SessionID); schema.CodeOf(rerr) == schema.CodeErased {
				return AppendReply{}, rerr
			}
			return AppendReply{}, err
		}
		reload = false
		if ent.state.Exists() {
			if err := api.Authorize(p.caller, req.SessionID, &ent.state.Meta); err != nil {
				return AppendReply{}, err
			}
			if p.grants {
				if err := api.MayGrant(p.caller, req.SessionID, &ent.state.Meta); err != nil {
					return AppendReply{}, err
				}
			}
		}
		if ent.state.LastSeq == 0 || fresh {
			// The id must not be an erased one, or one being erased
			// (DESIGN.md section 14), read from the record's leader. A
			// cached state needs no read: an erase seals the session by
			// deleting the tail the cache holds, so the append fails the
			// stream's per-subject check and comes back here fresh.
			if err := refuseErased(ctx, s.st, req.SessionID); err != nil {
				return AppendReply{}, err
			}
		}
		// Every event id is looked up, the writer's own too (a request
		// may mix them with the client's): a miss, the common case,
		// costs a hash and a map lookup per event.
		rep, ok, err := s.duplicateOf(ctx, req, ent)
		if errors.Is(err, errIndexedAbsent) {
			// The index places one of the request's ids at a stream seq
			// that reads as empty. A cached index may hold an event
			// removed since: fold the session from the log. A fresh fold
			// that still places it there is read from a stale leader:
			// the event may be stored, so neither append it again nor
			// call the retry a conflict.
			s.cache.Remove(req.SessionID)
			if !fresh {
				reload = true
				continue
			}
			return AppendReply{}, schema.Errorf(schema.CodeNotCommitted, "%v: nothing stored, retry", err)
		}
		if err != nil {
			return AppendReply{}, err
		}
		if ok {
			return rep, nil
		}
		last := ent.state.LastSeq
		if p.expected != nil && *p.expected != last {
			// A cached state may be behind another writer's append:
			// refuse only on what the stream leader says now.
			if !fresh {
				reload = true
				continue
			}
			if *p.expected > last && rereads < staleRereads {
				// The agent knows of events the read does not show: in a
				// consistent read that is the agent's error, but a former
				// leader cut off by a partition, still taking itself for
				// the leader, answers reads from what it has. Read again
				// before refusing.
				if err := sleepCtx(ctx, staleRereadWait<<rereads); err != nil {
					return AppendReply{}, schema.Errorf(schema.CodeNotCommitted, "%v", err)
				}
				rereads++
				reload = true
				continue
			}
			if *p.expected > last {
				// Still behind after the rereads. Acknowledged events are
				// never lost, so either the agent is wrong or the read is
				// stale: while the log is not whole (a leader cut off, a
				// replica not reached) the read cannot be trusted, and a
				// conflict would send a live agent away from its session.
				if _, werr := s.st.Writable(ctx); werr != nil {
					return AppendReply{}, schema.Errorf(schema.CodeNotCommitted,
						"expectedSeq %d is past the session's last seq %d as read while the log is not whole (%v): the read may be stale; nothing stored, retry",
						*p.expected, last, werr)
				}
			}
			s.log.Debug("writer: conflict", "session", req.SessionID, "expected", *p.expected, "last", last,
				"tailStreamSeq", ent.tail.StreamSeq, "tailEvent", ent.tail.EventID, "storeConflicts", retries)
			return AppendReply{}, conflict(last, fmt.Sprintf("expectedSeq %d, the session's last seq is %d", *p.expected, last))
		}
		next, plan, err := s.check(ent.state, req)
		if err != nil {
			if !fresh {
				reload = true
				continue
			}
			return AppendReply{}, err
		}
		if last == 0 && !p.caller.Operator() && !reserved {
			if reserved, err = s.usage.reserveSession(ctx, tenant); err != nil {
				return AppendReply{}, err
			}
		}
		res, err := s.st.Append(ctx, logstore.AppendRequest{SessionID: req.SessionID, ExpectedStreamSeq: ent.tail.StreamSeq, PrevHash: ent.tail.Hash, Events: req.Events, Bodies: p.storeBodies(req.Events)})
		if err != nil {
			if errors.Is(err, logstore.ErrConflict) {
				// Another writer moved the tail. Reload: the next round
				// answers an explicit expectation (conflict or duplicate)
				// from the fresh state, or appends after the new tail.
				if retries >= s.cfg.ConflictRetries {
					var ce *logstore.ConflictError
					cur := last
					if errors.As(err, &ce) {
						cur = ce.Tail.Seq
					}
					return AppendReply{}, conflict(cur, fmt.Sprintf("the session's tail kept moving (%d retries)", retries))
				}
				retries++
				if p.expected == nil {
					s.m.retries.Inc()
				}
				reload = true
				continue
			}
			// Unknown or refused: the next request folds from the log
			// (a refusal before sending, such as too_large, left it as is).
			if c := schema.CodeOf(err); c != schema.CodeTooLarge && c != schema.CodeInvalidEvent {
				s.cache.Remove(req.SessionID)
			}
			return AppendReply{}, err
		}
		if res.Duplicate {
			// JetStream's duplicate window knew an id this writer's index
			// did not (another writer stored it after this one's state):
			// fold the session again and answer from the stored events
			// (duplicate, or invalid_event for other content). Should the
			// fold still not show it, answer as JetStream did.
			s.st.ForgetTail(req.SessionID)
			s.cache.Remove(req.SessionID)
			if dups == 0 {
				dups++
				reload = true
				continue
			}
			return s.duplicateInWindow(ctx, req, res)
		}
		// Stored: counted in the tenant's usage.
		newSession := int64(0)
		if last == 0 {
			created = true
			if !reserved {
				newSession = 1
			}
		}
		s.usage.count(tenant, newSession, res.Bytes)
		// Commit the folded state only now that JetStream acknowledged.
		if next != nil {
			ent.state = next
		} else if err := ent.state.Commit(plan); err != nil {
			// Planned under the same lock: this cannot happen, but a
			// state that disagrees with the log must not be kept.
			s.cache.Remove(req.SessionID)
			s.log.Error("writer: committed event does not fold", "session", req.SessionID, "err", err)
			return AppendReply{SessionID: req.SessionID, FirstSeq: res.FirstSeq, LastSeq: res.LastSeq, StreamSeq: res.StreamSeq}, nil
		}
		for i := range req.Events {
			e := &req.Events[i]
			// An atomic batch is stored contiguously.
			ss := res.StreamSeq - uint64(len(req.Events)-1-i)
			s.index(ent, e.EventID, ss)
		}
		lastEv := &req.Events[len(req.Events)-1]
		ent.tail = logstore.Tail{Seq: res.LastSeq, StreamSeq: res.StreamSeq, EventID: lastEv.EventID, Hash: res.Hash}
		s.cache.Add(req.SessionID, ent)
		if s.snapDue(ent) {
			s.snapshot(req.SessionID, ent)
		}
		s.m.events.Add(float64(len(req.Events)))
		return AppendReply{SessionID: req.SessionID, FirstSeq: res.FirstSeq, LastSeq: res.LastSeq, StreamSeq: res.StreamSeq, Hash: res.Hash}, nil
	}
}

// check assigns seqs after st.LastSeq and applies every event to a copy of
// st, which it returns (st itself is unchanged until the append commits).
// A single event is only planned, and nil returned with its plan: the
// common case pays for no clone, and the plan is committed to st once the
// log has the event, without checking it again.
func (s *Service) check(st *session.State, req *AppendRequest) (*session.State, session.Plan, error) {
	for i := range req.Events {
		req.Events[i].Seq = st.LastSeq + 1 + uint64(i)
	}
	if len(req.Events) == 1 {
		p, err := st.Plan(&req.Events[0])
		if err != nil {
			return nil, session.Plan{}, indexed(err, 0)
		}
		return nil, p, nil
	}
	next := st.Clone()
	for i := range req.Events {
		if err := next.Apply(&req.Events[i]); err != nil {
			return nil, session.Plan{}, indexed(err, i)
		}
	}
	return next, session.Plan{}, nil
}

func indexed(err error, i int) error {
	var se *schema.Error
	if errors.As(err, &se) {
		return se.WithIndex(i)
	}
	return schema.Errorf(schema.CodeStructure, "%v", err).WithIndex(i)
}

// staleRereads bounds the reads again of a session whose tail shows
// fewer events than the agent expects; staleRereadWait is the first wait
// (doubled each time: 25+50+100+200 ms).
const (
	staleRereads    = 4
	staleRereadWait = 25 * time.Millisecond
)

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func conflict(cur uint64, msg string) error {
	return &schema.Error{Code: schema.CodeConflict, Message: msg, Index: -1, CurrentSeq: &cur}
}

// errIndexedAbsent is duplicateOf's answer when the session's index
// places a request's event id at a stream seq that reads as empty.
var errIndexedAbsent = errors.New("an indexed event reads as absent (a stale read or a removed event)")

// duplicateOf looks the request's event ids up in the session's index of
// every stored id. None stored: not a duplicate (ok false, no error), the
// request appends. Every event stored, in the request's order at
// consecutive seqs, with the same content: the committed duplicate it is,
// whenever it comes. Anything else (stored and new ids mixed, a stored id
// with other content, stored events in another order) is refused with
// invalid_event naming a stored id and its seq; nothing is stored.
func (s *Service) duplicateOf(ctx context.Context, req *AppendRequest, ent *entry) (AppendReply, bool, error) {
	var got []*logstore.Event // the stored event of each request event, if any
	var buf [4]uint64
	for i := range req.Events {
		id := req.Events[i].EventID
		cands := ent.candidates(buf[:0], s.hashID(id), id)
		if len(cands) == 0 {
			continue
		}
		// A hit is a candidate only: confirm it on the stored event.
		var found *logstore.Event
		for _, ss := range cands {
			if found != nil {
				continue
			}
			st, err := s.storedEvent(ctx, req.SessionID, ss)
			if err != nil {
				return AppendReply{}, false, err
			}
			if st != nil && st.EventID == id {
				found = st
			}
			if st == nil {
				// The index holds only seqs read from the log or
				// acknowledged to this writer: a read that finds nothing
				// there is stale (a former leader behind) or the event
				// was removed. Taken for a miss, a retry of a stored
				// event would look new: stored twice without an
				// expectation, answered conflict with one.
				s.log.Warn("writer: indexed event not found", "session", req.SessionID, "streamSeq", ss, "eventId", schema.Clip(id, 40))
				return AppendReply{}, false, fmt.Errorf("%w: event id %s is indexed at stream seq %d", errIndexedAbsent, schema.Clip(id, 40), ss)
			}
		}
		if found == nil {
			continue // another id with the same hash
		}
		if got == nil {
			got = make([]*logstore.Event, len(req.Events))
		}
		got[i] = found
	}
	if got == nil {
		return AppendReply{}, false, nil
	}
	refuse := func(i int, format string, args ...any) error {
		return schema.Errorf(schema.CodeInvalidEvent, format, args...).WithIndex(i)
	}
	var first *logstore.Event
	firstAt := -1
	for i, g := range got {
		if g != nil && first == nil {
			first, firstAt = g, i
		}
	}
	for i, g := range got {
		if g == nil {
			return AppendReply{}, false, refuse(firstAt, "eventId %s is already stored at seq %d, and event %d of this request is new: "+
				"an event id is unique in its session, send new events with new ids", schema.Clip(first.EventID, 40), first.Seq, i)
		}
	}
	for i, g := range got {
		if !sameContent(&req.Events[i], &g.Envelope) {
			return AppendReply{}, false, refuse(i, "eventId %s is already stored at seq %d with other content: an event id is unique in its session", schema.Clip(g.EventID, 40), g.Seq)
		}
		if g.Seq != got[0].Seq+uint64(i) {
			return AppendReply{}, false, refuse(i, "eventId %s is already stored at seq %d, not after seq %d as in this request", schema.Clip(g.EventID, 40), g.Seq, got[0].Seq+uint64(i)-1)
		}
	}
	last := got[len(got)-1]
	return AppendReply{SessionID: req.SessionID, FirstSeq: got[0].Seq, LastSeq: last.Seq, StreamSeq: last.StreamSeq, Duplicate: true}, true, nil
}

// sameContent reports whether the event a client sent is the stored one,
// but for the fields the writer fills (seq, time, sessionId,
// schemaVersion): both are encoded as the store encodes an event, with
// those fields taken from the stored event.
func sameContent(sent, stored *schema.Envelope) bool {
	a, b := *sent, *stored
	a.Seq, a.Time, a.SessionID, a.SchemaVersion = b.Seq, b.Time, b.SessionID, b.SchemaVersion
	ea, err := schema.Encode(&a)
	if err != nil {
		return false
	}
	eb, err := schema.Encode(&b)
	return err == nil && bytes.Equal(ea, eb)
}

// duplicateInWindow answers an append that JetStream deduplicated (one
// event, or a batch the store resolved from the log): its last event is
// stored at res.StreamSeq.
func (s *Service) duplicateInWindow(ctx context.Context, req *AppendRequest, res logstore.AppendResult) (AppendReply, error) {
	loc, _ := s.st.Locate(req.SessionID)
	m, err := s.st.MsgAt(ctx, loc.Stream, res.StreamSeq)
	if err != nil || m == nil {
		return AppendReply{}, schema.Errorf(schema.CodeOutcomeUnknown, "JetStream reported event %s as a duplicate at stream seq %d, which cannot be read: %v", req.Events[0].EventID, res.StreamSeq, err)
	}
	seq, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
	if err != nil {
		return AppendReply{}, schema.Errorf(schema.CodeOutcomeUnknown, "stored duplicate at stream seq %d has no seq header", res.StreamSeq)
	}
	// res.StreamSeq is the batch's last event: an atomic batch is stored
	// contiguously, so the first is len-1 seqs before it.
	n := uint64(len(req.Events))
	if seq < n {
		return AppendReply{}, schema.Errorf(schema.CodeOutcomeUnknown, "stored duplicate at stream seq %d has seq %d, below the batch of %d", res.StreamSeq, seq, n)
	}
	return AppendReply{SessionID: req.SessionID, FirstSeq: seq - n + 1, LastSeq: seq, StreamSeq: res.StreamSeq, Duplicate: true}, nil
}

// unmarshal is schema.Unmarshal (the checks of schema.CheckJSON, then a
// decode refusing unknown fields) without its cleaning of type errors.
func unmarshal(b []byte, v any) error {
	if err := schema.CheckJSON(b, schema.MaxJSONDepth); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// forkChild reports whether a session/created names a parent.
func forkChild(e *schema.Envelope) bool {
	var d schema.SessionCreated
	return e.DecodeData(&d) == nil && d.Parent != nil
}
