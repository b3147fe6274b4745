// Package memlog is a session log kept in memory, for the rule scripts of
// the services that read and append to the log (the repairer's, the
// forker's, the eraser's and the projector's testdata): it implements the
// interfaces those services declare (repairer.Log, forker.Log and
// forker.Records, eraser.Log, projector.Log: what the projector's start,
// fold, catch-up, erasure watch, rollback checks and readiness read of
// the log; its consume loop's followers are Follow's) and httpapi.Log
// through httpapi.LogOf (the projector's HTTP side: its follows read a
// page at a time, Fetch, and live events, Live and PublishLive) as
// internal/logstore does on JetStream, by the same rules and the same
// code where the rules are code (logstore.BuildMessages, logstore.Judge,
// logstore.TailOf, ChainHash, CheckSnapshot); MsgAt and LastStreamSeq (or
// StreamStatus) let a script deliver a stream's messages in stream order,
// as a consumer does.
//
// What it keeps faithfully: the messages of each stream in stream order
// (one stream per partition of the layout), with their ids and SL-Seq /
// SL-Prev headers; the per-subject expected-last-sequence check of an
// append, and what logstore.Append makes of a refused one (a duplicate of
// the same event ids, else a conflict with the tail); grouped batches,
// all or nothing; reads judged as logstore reads them; snapshots checked
// against the log; leases and claims with their revisions, EndLease's
// and DropClaim's revision checks; erasure records and their revisions,
// followed as they are written; deletes of stored messages, one audit
// record a session; tenants' usage; the fork records; transient events
// given to the subscriptions of their session, one at a time.
//
// What it does not: nothing is lost or unanswered (no outcome_unknown
// but for an expectation past the tail, no stalls, no replicas); message
// ids are remembered for ever, not for the stream's Duplicates window; a
// lease never runs out by itself (no TTL, no expiry marker: a script ends
// it with EndLease); no connection, no restart and no recovery of files
// (Connected is true, Reconnects 0, StreamLost nil); WatchLeases is
// refused (a repairer on memlog is driven by its callers, not by a lease
// watch); tenants have no bounds (ReserveStored reserves nothing); no
// source index; no transient event is dropped (PublishLive waits for
// each subscription).
package memlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Log is a session log in memory. It is safe for concurrent use.
type Log struct {
	cfg    logstore.Config
	layout logstore.Layout
	// Now is the clock of the lease and claim entries (default time.Now).
	Now func() time.Time

	mu      sync.Mutex
	streams map[string]*stream
	// created is when every stream was created: with the log.
	created time.Time
	// stored is closed (and made again) when messages are stored: the
	// followers waiting for one wake (follow.go).
	stored chan struct{}
	// unavailable: new followers are refused as JetStream refuses them
	// while a stream has no leader (SetUnavailable).
	unavailable bool
	// leases and claims: the last entry of each key, and each bucket's
	// last revision.
	leases     map[string]leaseEntry
	claims     map[string]claimEntry
	leaseRev   uint64
	claimRev   uint64
	snapshots  map[string]*logstore.SnapshotBase
	erasures   map[string]erasureEntry
	erasureRev uint64
	usage      map[string]logstore.TenantUsage
	usageRev   uint64
	givenBack  map[string]bool // erased sessions given back (GiveBackErased)
	audits     []api.AuditRecord
	// followers get each erasure record written (FollowErasureRecords).
	followers         []chan logstore.Erasure
	forks             *ForkRecords
	appends, refusals int
	// live are the subscriptions to transient events (Live); liveMu
	// guards them, and is held while PublishLive gives an event to them.
	liveMu sync.Mutex
	live   []*LiveSub
}

type stream struct {
	msgs []*logstore.Msg // index stream seq - 1; nil once deleted
	ids  map[string]uint64
}

type leaseEntry struct {
	lease  *logstore.Lease
	rev    uint64
	stored time.Time
	ttl    time.Duration
}

type claimEntry struct {
	rev uint64
	at  time.Time
	c   logstore.Claim
}

type erasureEntry struct {
	e   logstore.Erasure
	rev uint64
}

// New returns an empty log; cfg takes logstore's defaults (its
// Partitions: the layout's).
func New(cfg logstore.Config) (*Log, error) {
	cfg = logstore.Defaults(cfg)
	layout, err := logstore.NewLayout(max(cfg.Partitions, 1))
	if err != nil {
		return nil, err
	}
	return &Log{cfg: cfg, layout: layout, Now: time.Now, created: time.Now().UTC(), stored: make(chan struct{}),
		streams: map[string]*stream{}, leases: map[string]leaseEntry{}, claims: map[string]claimEntry{},
		snapshots: map[string]*logstore.SnapshotBase{}, erasures: map[string]erasureEntry{},
		usage: map[string]logstore.TenantUsage{}, givenBack: map[string]bool{}, forks: &ForkRecords{recs: map[string]logstore.ForkRecord{}}}, nil
}

// Config is the log's configuration.
func (l *Log) Config() logstore.Config { return l.cfg }

// Locate is the stream and subject of a session.
func (l *Log) Locate(sessionID string) (logstore.Location, error) { return l.layout.Locate(sessionID) }

// Streams lists the streams that hold sessions.
func (l *Log) Streams() []string { return l.layout.Streams() }

func (l *Log) stream(name string) *stream {
	s := l.streams[name]
	if s == nil {
		s = &stream{ids: map[string]uint64{}}
		l.streams[name] = s
	}
	return s
}

// subjectMsgs is the session's stored messages after stream seq after, in
// stream order. The caller holds mu.
func (l *Log) subjectMsgs(loc logstore.Location, after uint64) []*logstore.Msg {
	var out []*logstore.Msg
	s := l.stream(loc.Stream)
	for i := after; i < uint64(len(s.msgs)); i++ {
		if m := s.msgs[i]; m != nil && m.Subject == loc.Subject {
			out = append(out, m)
		}
	}
	return out
}

// last is the session's last stored message (nil: none). The caller
// holds mu.
func (l *Log) last(loc logstore.Location) *logstore.Msg {
	s := l.stream(loc.Stream)
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if m := s.msgs[i]; m != nil && m.Subject == loc.Subject {
			return m
		}
	}
	return nil
}

// Tail is the session's last event (a last message that is not one: its
// verdict).
func (l *Log) Tail(ctx context.Context, sessionID string) (logstore.Tail, error) {
	t, ue, err := l.TailPosition(ctx, sessionID)
	if ue != nil {
		return logstore.Tail{}, ue
	}
	return t, err
}

// TailPosition is where the session's last stored message is, with its
// verdict (logstore.Store.TailPosition).
func (l *Log) TailPosition(_ context.Context, sessionID string) (logstore.Tail, *logstore.UnreadableError, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return logstore.Tail{}, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return logstore.TailPositionOf(sessionID, l.last(loc))
}

// NextAfter is the session's first stored message after stream seq
// after; nil when there is none.
func (l *Log) NextAfter(_ context.Context, sessionID string, after uint64) (*logstore.Msg, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(loc.Stream)
	for i := after; i < uint64(len(s.msgs)); i++ {
		if m := s.msgs[i]; m != nil && m.Subject == loc.Subject {
			return m, nil
		}
	}
	return nil, nil
}

// MsgAt is the message stored at stream seq seq of the stream; nil when
// there is none (never stored, or deleted).
func (l *Log) MsgAt(_ context.Context, stream string, seq uint64) (*logstore.Msg, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(stream)
	if seq == 0 || seq > uint64(len(s.msgs)) {
		return nil, nil
	}
	return s.msgs[seq-1], nil
}

// LastStreamSeq is the stream's last sequence: that of the last message
// it stored, deleted or not (0: none).
func (l *Log) LastStreamSeq(_ context.Context, stream string) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.stream(stream).msgs)), nil
}

// StreamStatus is where the stream ends (its last sequence, deleted
// messages' included), how many messages it holds, and when it was
// created (with the log).
func (l *Log) StreamStatus(_ context.Context, stream string) (logstore.StreamStatus, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(stream)
	st := logstore.StreamStatus{LastSeq: uint64(len(s.msgs)), Created: l.created}
	for _, m := range s.msgs {
		if m != nil {
			st.Msgs++
		}
	}
	return st, nil
}

// LastHeldSeq is the stream seq of the last message the stream still
// holds (0: none): below its last sequence when its last messages were
// deleted.
func (l *Log) LastHeldSeq(_ context.Context, stream string) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(stream)
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if s.msgs[i] != nil {
			return s.msgs[i].StreamSeq, nil
		}
	}
	return 0, nil
}

// ReadSession calls fn with each of the session's stored events after
// afterStreamSeq up to its tail, which it returns; fn may return
// logstore.ErrStop.
func (l *Log) ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return logstore.Tail{}, err
	}
	l.mu.Lock()
	tail, err := logstore.TailOf(sessionID, l.last(loc))
	msgs := l.subjectMsgs(loc, afterStreamSeq)
	l.mu.Unlock()
	if err != nil {
		return logstore.Tail{}, err
	}
	return readTo(msgs, tail, fn)
}

// ReadSessionTo is ReadSession up to tail, read before.
func (l *Log) ReadSessionTo(ctx context.Context, sessionID string, afterStreamSeq uint64, tail logstore.Tail, fn func(*logstore.Msg) error) (logstore.Tail, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return logstore.Tail{}, err
	}
	l.mu.Lock()
	msgs := l.subjectMsgs(loc, afterStreamSeq)
	l.mu.Unlock()
	return readTo(msgs, tail, fn)
}

// ReadVerdicts gives every stored message of the session after stream
// seq afterStreamSeq up to tail with its verdict (logstore.WalkStored).
func (l *Log) ReadVerdicts(ctx context.Context, sessionID string, afterStreamSeq uint64, tail logstore.Tail, fn func(m *logstore.Msg, verdict error) error) error {
	return logstore.WalkStored(ctx, l, sessionID, afterStreamSeq, tail, fn)
}

// readTo calls fn with each of msgs up to tail's stream seq.
func readTo(msgs []*logstore.Msg, tail logstore.Tail, fn func(*logstore.Msg) error) (logstore.Tail, error) {
	for _, m := range msgs {
		if m.StreamSeq > tail.StreamSeq {
			break
		}
		if err := fn(m); err != nil {
			if errors.Is(err, logstore.ErrStop) {
				return tail, nil
			}
			return tail, err
		}
	}
	return tail, nil
}

// ReadJudged is logstore's ReadJudged: the session's messages after
// j.Last judged in order (copies skipped), read up to a last message that
// is not an event too, so that the verdict names the first bad one.
func (l *Log) ReadJudged(_ context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error) {
	loc, err := l.Locate(j.SessionID)
	if err != nil {
		return logstore.Tail{}, err
	}
	l.mu.Lock()
	lastMsg := l.last(loc)
	msgs := l.subjectMsgs(loc, j.Last.StreamSeq)
	l.mu.Unlock()
	tail, terr := logstore.TailOf(j.SessionID, lastMsg)
	if terr != nil {
		var bad *logstore.UnreadableError
		if !errors.As(terr, &bad) || bad.StreamSeq <= j.Last.StreamSeq {
			return logstore.Tail{}, terr
		}
		tail = logstore.Tail{StreamSeq: lastMsg.StreamSeq}
	}
	for _, m := range msgs {
		ev, v, err := j.Next(m)
		switch v {
		case logstore.VerdictUnreadable:
			return tail, err
		case logstore.VerdictCopy:
			continue
		}
		if fn == nil {
			continue
		}
		if err := fn(m, &ev); err != nil {
			if errors.Is(err, logstore.ErrStop) {
				return tail, nil
			}
			return tail, err
		}
	}
	return tail, nil
}

// FirstUnreadable is the verdict on the session's first unreadable
// message (nil: none).
func (l *Log) FirstUnreadable(ctx context.Context, sessionID string) error {
	_, err := l.ReadJudged(ctx, &logstore.Judge{SessionID: sessionID}, nil)
	return err
}

// Messages builds the messages Append stores for req.
func (l *Log) Messages(req *logstore.AppendRequest) ([]*nats.Msg, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, msgs, err := l.located(req)
	return msgs, err
}

// located checks req and builds its messages, after the body stored at
// the expected position (logstore's prevHash). The caller holds mu.
func (l *Log) located(req *logstore.AppendRequest) (logstore.Location, []*nats.Msg, error) {
	if len(req.Events) == 0 {
		return logstore.Location{}, nil, schema.Errorf(schema.CodeBadRequest, "no events")
	}
	if len(req.Events) > schema.MaxBatchEvents {
		return logstore.Location{}, nil, schema.Errorf(schema.CodeTooLarge, "%d events, at most %d per append", len(req.Events), schema.MaxBatchEvents)
	}
	loc, err := l.Locate(req.SessionID)
	if err != nil {
		return logstore.Location{}, nil, err
	}
	prev := req.PrevHash
	if prev == "" && req.ExpectedStreamSeq > 0 {
		s := l.stream(loc.Stream)
		if i := req.ExpectedStreamSeq - 1; i < uint64(len(s.msgs)) && s.msgs[i] != nil && s.msgs[i].Subject == loc.Subject {
			prev = logstore.ChainHash(s.msgs[i].Data)
		}
	}
	msgs, err := logstore.BuildMessages(l.cfg, req, loc.Subject, prev)
	return loc, msgs, err
}

// Append stores req's events after the session's event at
// req.ExpectedStreamSeq, all or none. A request whose expectation fails,
// or whose ids are stored, is what logstore.Append resolves it to: a
// duplicate when the events after the expected position are its own, a
// *logstore.ConflictError otherwise.
func (l *Log) Append(_ context.Context, req logstore.AppendRequest) (logstore.AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	loc, msgs, err := l.located(&req)
	if err != nil {
		return logstore.AppendResult{}, err
	}
	if why := l.refuses(loc, &req, msgs); why != "" {
		l.refusals++
		return l.resolve(loc, &req)
	}
	return l.store(loc, &req, msgs), nil
}

// refuses says why the stream would refuse msgs ("": it takes them): an
// id it stores already, or the session's last message not at the
// expected stream seq. The caller holds mu.
func (l *Log) refuses(loc logstore.Location, req *logstore.AppendRequest, msgs []*nats.Msg) string {
	s := l.stream(loc.Stream)
	for _, m := range msgs {
		if _, dup := s.ids[m.Header.Get(logstore.HeaderMsgID)]; dup {
			return "duplicate message id"
		}
	}
	var at uint64
	if m := l.last(loc); m != nil {
		at = m.StreamSeq
	}
	if at != req.ExpectedStreamSeq {
		return fmt.Sprintf("wrong last sequence: %d", at)
	}
	return ""
}

// store appends msgs to the stream. The caller holds mu.
func (l *Log) store(loc logstore.Location, req *logstore.AppendRequest, msgs []*nats.Msg) logstore.AppendResult {
	s := l.stream(loc.Stream)
	res := logstore.AppendResult{FirstSeq: req.Events[0].Seq, LastSeq: req.Events[len(req.Events)-1].Seq}
	for _, m := range msgs {
		seq := uint64(len(s.msgs)) + 1
		h := make(nats.Header, len(m.Header))
		for k, v := range m.Header {
			h[k] = slices.Clone(v)
		}
		s.msgs = append(s.msgs, &logstore.Msg{StreamSeq: seq, Subject: m.Subject, Header: h, Data: slices.Clone(m.Data)})
		s.ids[h.Get(logstore.HeaderMsgID)] = seq
		res.StreamSeq, res.Bytes = seq, res.Bytes+len(m.Data)
	}
	res.Hash = logstore.ChainHash(msgs[len(msgs)-1].Data)
	l.wake()
	l.appends++
	return res
}

// resolve is logstore's resolve of a refused append: the first message of
// the session after the expected position carries the request's first
// event id (stored already: Duplicate), or another (a conflict). None
// there: the expected position is past the tail, or erased. The caller
// holds mu.
func (l *Log) resolve(loc logstore.Location, req *logstore.AppendRequest) (logstore.AppendResult, error) {
	next := l.subjectMsgs(loc, req.ExpectedStreamSeq)
	tail, terr := logstore.TailOf(req.SessionID, l.last(loc))
	if len(next) == 0 {
		s := l.stream(loc.Stream)
		if req.ExpectedStreamSeq > 0 && req.ExpectedStreamSeq <= uint64(len(s.msgs)) {
			return logstore.AppendResult{}, &logstore.ConflictError{Tail: tail, Expected: req.ExpectedStreamSeq}
		}
		// JetStream leaves such an append unresolved: it is refused
		// after its re-sends with outcome_unknown.
		return logstore.AppendResult{}, &schema.Error{Code: schema.CodeOutcomeUnknown, Index: -1,
			Message: fmt.Sprintf("the expected stream seq %d is past the session's tail", req.ExpectedStreamSeq)}
	}
	if next[0].EventID() != req.Events[0].EventID {
		if terr != nil {
			return logstore.AppendResult{}, schema.Errorf(schema.CodeUnreadable, "the session's position after stream seq %d is taken and its tail is not an event: %v", req.ExpectedStreamSeq, terr)
		}
		return logstore.AppendResult{}, &logstore.ConflictError{Tail: tail, Expected: req.ExpectedStreamSeq}
	}
	n := len(req.Events)
	if len(next) < n || next[n-1].EventID() != req.Events[n-1].EventID {
		return logstore.AppendResult{}, fmt.Errorf("memlog: batch of %d found at stream seq %d but its last event is missing", n, next[0].StreamSeq)
	}
	return logstore.AppendResult{FirstSeq: req.Events[0].Seq, LastSeq: req.Events[n-1].Seq, StreamSeq: next[n-1].StreamSeq, Duplicate: true}, nil
}

// AppendGroup stores the parts' messages as one batch, all or none, as
// logstore's AppendGroup: the sessions must differ and share a stream. A
// batch one of whose parts the stream refuses is refused whole
// (logstore.ClassifySend: SendRefused), and the caller appends the parts
// alone.
func (l *Log) AppendGroup(_ context.Context, parts []logstore.GroupPart) ([]logstore.AppendResult, error) {
	if len(parts) == 0 {
		return nil, schema.Errorf(schema.CodeBadRequest, "no appends to group")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var stream string
	seen := map[string]bool{}
	n := 0
	for i, p := range parts {
		if len(p.Msgs) == 0 || len(p.Msgs) != len(p.Req.Events) {
			return nil, schema.Errorf(schema.CodeBadRequest, "group part %d: %d messages for %d events", i, len(p.Msgs), len(p.Req.Events))
		}
		loc, err := l.Locate(p.Req.SessionID)
		if err != nil {
			return nil, err
		}
		if seen[p.Req.SessionID] {
			return nil, schema.Errorf(schema.CodeBadRequest, "session %s twice in one group", p.Req.SessionID)
		}
		seen[p.Req.SessionID] = true
		if i == 0 {
			stream = loc.Stream
		} else if loc.Stream != stream {
			return nil, schema.Errorf(schema.CodeBadRequest, "a group spans streams %s and %s", stream, loc.Stream)
		}
		if why := l.refuses(loc, p.Req, p.Msgs); why != "" {
			l.refusals++
			return nil, schema.Errorf(schema.CodeConflict, "grouped append of %d sessions: session %s: %s", len(parts), p.Req.SessionID, why)
		}
		n += len(p.Msgs)
	}
	if n > schema.MaxBatchEvents {
		return nil, schema.Errorf(schema.CodeTooLarge, "%d events in one group, at most %d", n, schema.MaxBatchEvents)
	}
	out := make([]logstore.AppendResult, len(parts))
	for i, p := range parts {
		loc, _ := l.Locate(p.Req.SessionID)
		out[i] = l.store(loc, p.Req, p.Msgs)
	}
	return out, nil
}

// Counts: the appends stored, and the appends (single or grouped) the
// stream refused.
func (l *Log) Counts() (appends, refusals int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appends, l.refusals
}

// PutRaw stores data on the session's subject with headers as they are,
// around every check: a message written around the writer (a test's
// garbage, or a newer version's event).
func (l *Log) PutRaw(sessionID string, header nats.Header, data []byte) (uint64, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return 0, err
	}
	return l.PutSubject(loc.Stream, loc.Subject, header, data), nil
}

// PutSubject stores data on subject in stream with headers as they are,
// around every check (a subject that names no session included), and
// returns its stream seq.
func (l *Log) PutSubject(stream, subject string, header nats.Header, data []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(stream)
	seq := uint64(len(s.msgs)) + 1
	if header == nil {
		header = nats.Header{}
	}
	s.msgs = append(s.msgs, &logstore.Msg{StreamSeq: seq, Subject: subject, Header: header, Data: data})
	l.wake()
	return seq
}

// PutSnapshot stores b as the session's snapshot, as a writer stores one
// (LoadSnapshot checks it against the log).
func (l *Log) PutSnapshot(sessionID string, b *logstore.SnapshotBase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snapshots[sessionID] = &logstore.SnapshotBase{Head: b.Head, Tail: b.Tail, State: b.State.Clone()}
}

// The services fold a session from its snapshot through
// logstore.FoldSession, on this log as on the store.
var _ logstore.SessionFolder = (*Log)(nil)

// LoadSnapshot returns the session's snapshot checked against the log by
// logstore's rules (logstore.CheckSnapshot). Nil, nil without one;
// logstore.ErrSnapshotMismatch when it does not match. Its state is the
// caller's own.
func (l *Log) LoadSnapshot(_ context.Context, sessionID string) (*logstore.SnapshotBase, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.snapshots[sessionID]
	if b == nil {
		return nil, nil
	}
	s := l.stream(loc.Stream)
	return logstore.CheckSnapshot(sessionID, b.Head, loc,
		func(streamSeq uint64) (*logstore.Msg, error) {
			if i := streamSeq - 1; i < uint64(len(s.msgs)) {
				return s.msgs[i], nil
			}
			return nil, nil
		},
		// The state as a writer stores it, so that it is read back by
		// the same rule.
		func(logstore.SnapshotPart) ([]byte, error) { return b.State.MarshalBinary() })
}

// Writable: a log in memory always takes writes.
func (l *Log) Writable(context.Context) ([]string, error) { return nil, nil }

// Erased reports whether the session has an erasure record.
func (l *Log) Erased(_ context.Context, sessionID string) (bool, error) {
	if err := logstore.ValidateSessionID(sessionID); err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.erasures[sessionID]
	return ok, nil
}

// MarkErased writes the session's erasure record unless it has one, and
// returns the record that holds.
func (l *Log) MarkErased(_ context.Context, e logstore.Erasure) (logstore.Erasure, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if got, ok := l.erasures[e.SessionID]; ok {
		return got.e, got.rev, nil
	}
	l.erasureRev++
	l.erasures[e.SessionID] = erasureEntry{e: e, rev: l.erasureRev}
	l.wrote(e)
	return e, l.erasureRev, nil
}

// CountUsage adds d to the tenant's usage.
func (l *Log) CountUsage(ctx context.Context, tenant string, d logstore.TenantUsage) error {
	_, _, err := l.AddUsage(ctx, tenant, d, nil)
	return err
}

// ReserveStored reserves nothing: a log in memory bounds no tenant, so the
// session is counted once stored (CountUsage).
func (l *Log) ReserveStored(context.Context, string, int64, string) (bool, error) { return false, nil }

// UsageOf is the tenant's usage.
func (l *Log) UsageOf(_ context.Context, tenant string) (logstore.TenantUsage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.usage[tenant], nil
}

// ForkRecords is the log's fork records (forker.Records).
func (l *Log) ForkRecords() *ForkRecords { return l.forks }

// ForkRecords keeps one record per fork copy in flight, by child id, with
// a revision each.
type ForkRecords struct {
	mu   sync.Mutex
	rev  uint64
	recs map[string]logstore.ForkRecord
}

// Create writes the child's record unless it has one
// (logstore.ErrForkRecordExists).
func (f *ForkRecords) Create(_ context.Context, child string, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.recs[child]; ok {
		return logstore.ErrForkRecordExists
	}
	f.rev++
	f.recs[child] = logstore.ForkRecord{Value: slices.Clone(value), Revision: f.rev}
	return nil
}

// Get returns the child's record; ok is false when it has none.
func (f *ForkRecords) Get(_ context.Context, child string) (logstore.ForkRecord, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[child]
	return r, ok, nil
}

// Put writes the child's record, whatever it was.
func (f *ForkRecords) Put(_ context.Context, child string, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	f.recs[child] = logstore.ForkRecord{Value: slices.Clone(value), Revision: f.rev}
	return nil
}

// Replace writes the child's record only if it is still at revision.
func (f *ForkRecords) Replace(_ context.Context, child string, value []byte, revision uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.recs[child]; !ok || r.Revision != revision {
		return fmt.Errorf("memlog: fork record %s is not at revision %d", child, revision)
	}
	f.rev++
	f.recs[child] = logstore.ForkRecord{Value: slices.Clone(value), Revision: f.rev}
	return nil
}

// Drop removes the child's record.
func (f *ForkRecords) Drop(_ context.Context, child string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, child)
	return nil
}

// Children lists the child ids that have a record in the order of their
// records' last writes, as the bucket lists its keys.
func (f *ForkRecords) Children(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.recs))
	for k := range f.recs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(f.recs[a].Revision, f.recs[b].Revision) })
	return keys, nil
}

// What the projector's rollback checks and readiness read of the log
// (projector.Log) beside its streams: a log in memory has no connection
// to lose, is never restarted, and recovers no files.

// Connected: a log in memory is always reachable.
func (l *Log) Connected() bool { return true }

// Reconnects: a log in memory has no connection that reconnects.
func (l *Log) Reconnects() uint64 { return 0 }

// StreamLost is nil: a log in memory recovers no files, so no server
// says it lost any of a stream's messages.
func (l *Log) StreamLost(context.Context, string) (*logstore.LostData, error) { return nil, nil }

// RollBack makes the stream end at stream seq last, as a node restored
// from an older copy of its files serves it: the messages after last are
// gone, their ids forgotten, and the next message stored takes seq
// last+1 (the rollback a projector raises log_rolled_back for). Nothing
// says it was lost (StreamLost).
func (l *Log) RollBack(stream string, last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(stream)
	if last >= uint64(len(s.msgs)) {
		return
	}
	for id, seq := range s.ids {
		if seq > last {
			delete(s.ids, id)
		}
	}
	clear(s.msgs[last:])
	s.msgs = s.msgs[:last]
}
