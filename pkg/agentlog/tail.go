package agentlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Log is what AppendSink needs of sessionlog: a session's stored tail and
// events, and an append after it. ship and import append through
// the Go client, the writer's source endpoints through its own append path.
type Log interface {
	// Tail is the session's last seq and the id of the event there (0
	// and "" for a session with none).
	Tail(ctx context.Context, sessionID string) (seq uint64, eventID string, err error)
	// Events gives fn the session's stored events after seq, in order.
	Events(ctx context.Context, sessionID string, after uint64, fn func(schema.Envelope) error) error
	// Append appends events (one atomic batch) after seq expected: last
	// is the session's last seq after them, duplicate that the batch was
	// stored already.
	Append(ctx context.Context, sessionID string, expected uint64, events []schema.Envelope) (last uint64, duplicate bool, err error)
}

// PreparingLog is a Log that can encode an append ahead of sending it.
// An AppendSink with InFlight prepares each batch before it takes a slot,
// so that a slot is held only while the batch is on its way and being
// stored, not while it is encoded.
type PreparingLog interface {
	Log
	// PrepareAppend encodes what Append(ctx, sessionID, expected, events)
	// sends; the returned send sends it (and resends it on an unknown
	// outcome, as Append does) and answers as Append answers. Neither
	// keeps events: the caller reuses their array once PrepareAppend
	// returns.
	PrepareAppend(sessionID string, expected uint64, events []schema.Envelope) (send func(ctx context.Context) (last uint64, duplicate bool, err error), err error)
}

// DivergedError: the stored session is not a prefix of what the source
// maps to now (the file was rewritten or shrank, or its main path moved).
// Synthetic events and the events an importer adds to continue a repaired
// session (see AppendSink) are not part of the comparison.
type DivergedError struct {
	Session string
	Seq     uint64 // the source's seq of the first event that differs
	Stored  string // the stored source event there
	Source  string // the id the source gives there; "" = the source ends before it
	// File is the stored session's sourceFile label ("" = none).
	File string
}

func (e *DivergedError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("session %s holds more than the source gives now (stored event %s is the source's seq %d, where the source ends)",
			e.Session, e.Stored, e.Seq)
	}
	return fmt.Sprintf("session %s differs from the source at seq %d (stored event %s, the source gives %s)",
		e.Session, e.Seq, e.Stored, e.Source)
}

// CollisionError: two files map to one session id, and the id made from
// the file's own name (FileSessionID) is taken by another file too.
type CollisionError struct {
	Session     string
	File, Other string
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("%s and %s both map to session %s: the id collides; %s is not imported (rename one of the files)",
		e.Other, e.File, e.Session, e.File)
}

// LabelSourceFile is the label of session/created naming the file a
// session was made from (AppendSink.File).
const LabelSourceFile = "sourceFile"

// DefaultAppendBatch is AppendSink's batch when it names none.
const DefaultAppendBatch = 500

// AppendSink is the step every writer of a source's sessions shares: for
// each session a source maps to, read the stored tail, check that what is
// stored is what the source gives, and append the events after it in
// batches. Mapping a
// source again therefore appends only what is new, and a source that no
// longer maps to what is stored is a *DivergedError.
//
// What is stored is compared with the source by event id, leaving out
// synthetic events (a repair's) and the events AppendSink
// itself adds to continue a repaired session: a session with a repair
// between the source's events continues when the source grows. The
// events after the repair are fitted to the session as it is stored: a
// paused session is resumed first (session/resumed, by By), a result for
// a call the repair closed becomes an ignorable tool/late-result (the
// repair's result stands: one result per call), and the events of a turn
// the repair ended go on in a turn that continues it (turnId
// "<turn>:c", its turn/started added). An event that still does not fit
// is not stored (Warn says so); its line is kept as source/line.
type AppendSink struct {
	Ctx   context.Context
	Log   Log
	Batch int // events per append (0: DefaultAppendBatch)
	// MaxBytes bounds the bytes of one append's events (their encoded
	// size, estimated from above): with Batch, whichever is reached first
	// ends a batch. 0: Batch alone.
	MaxBytes int
	// By is who resumes a session a repair paused (session/resumed "by").
	By string
	// File, when set, is the file the sessions come from, as a name that
	// stays the same across runs (FileLabel): a new session records it as
	// its label sourceFile; a file whose session id is another file's
	// goes to a session of its own (FileSessionID); and ReadFile sends a
	// file that is no longer a continuation of its session to the
	// session's next generation (GenerationID), probed on every run.
	File string
	// Warn, when set, is told what the sink decided in a file's stead: a
	// new generation, an event that could not be stored.
	Warn func(msg string)
	// Finished, when set, is told of each session when its events are in:
	// the session's last seq, the event id there, and how many events this
	// sink added to it.
	Finished func(p Plan, lastSeq uint64, lastID string, added int)
	// InFlight, when set, lets an append go out while the next batch is
	// mapped, holding one of its tokens while it is unanswered; sinks that
	// share it share the bound. A session has at most one append in
	// flight: the writer orders a session's appends by their expected
	// seq, not by their arrival. nil: each append is answered before the
	// sink takes the next event. Call Close when the source is read.
	InFlight chan struct{}
	// Locks, when set, lets one sink of those that share it at a time
	// write a session (the files of one import that map to one id go
	// one after the other). The lock is held from Session to Done (or
	// Close).
	Locks *SessionLocks
	// Cache, when set, keeps a stored session this sink had to read
	// whole for the next sink that finds its tail unchanged.
	Cache *StoredCache

	locked       string // the session id locked, "" = none
	plan         Plan
	tail         uint64 // stored last seq, as of the last answered append
	tailID       string // stored event id at tail
	pending      []schema.Envelope
	pendingBytes int
	added        int
	inflight     chan sentAppend // the append in flight; nil: none

	mode mode
	// seen: the ids of the source events before the tail seq, while mode
	// is bySeq; held: the last of them (keepBeforeTail), whole.
	seen      []string
	held      []schema.Envelope
	heldBytes int
	cmp       *storedSession
	compare   map[string]bool // plans compared byID from their start
	// orig is the plan's id of the session announced last, at the
	// session it goes to. instead: the session a plan's id goes to (a new
	// generation); probe: the id whose generations are probed for it (the
	// file's own).
	orig    string
	path    string // the file ReadFile reads
	at      generation
	instead map[string]generation
	probe   map[string]string
}

// mode is how an AppendSink compares the source with the stored session.
type mode uint8

const (
	// bySeq: the source's event at the tail seq is checked to be the
	// stored one (no event was added between the source's).
	bySeq mode = iota
	// appending: everything stored is passed; the rest is appended.
	appending
	// byID: the stored source events are compared one by one, and what
	// follows is fitted to the stored session's state.
	byID
)

// storedSession is what AppendSink knows of a stored session it compares
// by id.
type storedSession struct {
	st    *session.State
	ids   []string // the stored source events
	k     int      // source events compared or taken
	turns map[string]string
	file  string
}

// sentAppend is the answer to an append sent by flush: of its events it
// keeps only their number and the last one's id, so that a batch already
// encoded (PreparingLog) holds only its encoding while it waits for a slot
// and is in flight.
type sentAppend struct {
	n         int
	lastID    string
	last      uint64
	duplicate bool
	err       error
}

var _ Sink = (*AppendSink)(nil)

// Ids of the events AppendSink adds to continue a repaired session: the
// id of the source event they come before and one of these suffixes. A
// source event id ends in a digit (or is "created"), so these are never
// one.
const (
	idResumed = ":resumed"
	idTurn    = ":turn"
	idAttempt = ":attempt"
	// continued ends the id of a turn that continues one a repair ended.
	continued = ":c"
)

// added reports whether id is one AppendSink adds, not the source.
func addedID(id string) bool {
	return strings.HasSuffix(id, idResumed) || strings.HasSuffix(id, idTurn) || strings.HasSuffix(id, idAttempt)
}

// Session reads the session's tail.
func (s *AppendSink) Session(p Plan) error {
	// A session's first append waits for the one before it.
	if err := s.wait(); err != nil {
		return err
	}
	s.unlock()
	if s.Locks != nil {
		if err := s.Locks.lock(s.Ctx, p.ID); err != nil {
			return err
		}
		s.locked = p.ID
	}
	s.plan, s.orig, s.pending, s.pendingBytes, s.added = p, p.ID, s.pending[:0], 0, 0
	s.mode, s.seen, s.held, s.heldBytes, s.cmp = bySeq, s.seen[:0], nil, 0, nil
	var err error
	if s.File != "" {
		s.plan.ID, s.tail, s.tailID, err = s.current(p.ID)
		if err != nil {
			return err
		}
	} else if s.tail, s.tailID, err = s.Log.Tail(s.Ctx, p.ID); err != nil {
		return fmt.Errorf("read %s: %w", p.ID, err)
	}
	switch {
	case s.tail == 0:
		s.mode = appending
	case s.compare[p.ID] || !sourceLikeID(s.tailID):
		// Not a source event at the tail: a repair's, or one this
		// sink added.
		return s.byID()
	}
	return nil
}

// generation is a session of a file's plan: the base id (the plan's, or
// the file's own) and its generation (1: the base itself).
type generation struct {
	base string
	n    int
}

func (g generation) id() string {
	if g.n <= 1 {
		return g.base
	}
	return GenerationID(g.base, g.n)
}

// current is the session a file's plan goes to: the last generation of
// the id (GenerationID: <id>-r2, -r3, ... while they exist), with its tail.
func (s *AppendSink) current(id string) (string, uint64, string, error) {
	s.orig = id
	if g, ok := s.instead[id]; ok {
		s.at = g
		seq, eid, err := s.Log.Tail(s.Ctx, g.id())
		if err != nil {
			return "", 0, "", fmt.Errorf("read %s: %w", g.id(), err)
		}
		return g.id(), seq, eid, nil
	}
	base := id
	if b, ok := s.probe[id]; ok {
		base = b
	} else if other, err := s.storedFile(id); err != nil {
		return "", 0, "", err
	} else if other != "" && other != s.File {
		// Another file's session: this file has an id of its own.
		base = FileSessionID(id, s.File)
		mine, err := s.storedFile(base)
		switch {
		case err != nil:
			return "", 0, "", err
		case mine != "" && mine != s.File:
			return "", 0, "", &CollisionError{Session: base, File: s.File, Other: mine}
		case mine == "" && s.Warn != nil:
			s.Warn(fmt.Sprintf("%s: session %s is the session of another file (%s): this file goes to session %s", s.path, id, other, base))
		}
	}
	s.at = generation{base: base, n: 1}
	var seq uint64
	var eid string
	for g := (generation{base: base, n: 1}); ; g.n++ {
		t, tid, err := s.Log.Tail(s.Ctx, g.id())
		if err != nil {
			return "", 0, "", fmt.Errorf("read %s: %w", g.id(), err)
		}
		if t == 0 {
			return s.at.id(), seq, eid, nil
		}
		s.at, seq, eid = g, t, tid
	}
}

// storedFile is the sourceFile label of a stored session ("" for none,
// or no session).
func (s *AppendSink) storedFile(id string) (string, error) {
	var file string
	err := s.Log.Events(s.Ctx, id, 0, func(e schema.Envelope) error {
		if e.Type == schema.TypeSessionCreated {
			var d schema.SessionCreated
			if json.Unmarshal(e.Data, &d) == nil {
				file = d.Labels[LabelSourceFile]
			}
		}
		return errFirstOnly
	})
	if err != nil && !errors.Is(err, errFirstOnly) {
		return "", fmt.Errorf("read %s: %w", id, err)
	}
	return file, nil
}

// errFirstOnly stops a read after its first event.
var errFirstOnly = errors.New("agentlog: first event read")

// Event passes over what is stored of the source and queues the rest.
func (s *AppendSink) Event(e schema.Envelope) error {
	switch s.mode {
	case byID:
		return s.compareNext(e)
	case appending:
		// An append in flight holds only events after the tail it was
		// sent after, so a tail it has not advanced yet changes nothing.
		if e.Seq <= s.tail {
			return nil
		}
		return s.queue(e)
	}
	switch {
	case e.Seq < s.tail:
		s.seen = append(s.seen, e.EventID)
		if e.Seq+keepBeforeTail >= s.tail {
			s.held = append(s.held, e)
			s.heldBytes += len(e.Data)
			for len(s.held) > 1 && s.heldBytes > maxHeldBytes {
				s.heldBytes -= len(s.held[0].Data)
				s.held = s.held[1:]
			}
		}
		return nil
	case e.Seq == s.tail && e.EventID == s.tailID:
		s.mode, s.seen, s.held = appending, s.seen[:0], nil
		return nil
	case e.Seq > s.tail && len(s.seen) == 0:
		// The source starts after the tail: a continuation's events
		// (Continuation).
		s.mode = appending
		return s.queue(e)
	}
	// Not the stored event at that seq: events were added between the
	// source's (a repair), or the source is not what is stored.
	if err := s.byID(); err != nil {
		return err
	}
	return s.compareNext(e)
}

// byID reads the stored session, then compares the source events seen so
// far with it.
func (s *AppendSink) byID() error {
	if c := s.Cache.take(s.plan.ID, s.tail, s.tailID); c != nil {
		c.k = 0
		return s.compareFrom(c)
	}
	c := &storedSession{st: session.New(s.plan.ID), turns: map[string]string{}}
	err := s.Log.Events(s.Ctx, s.plan.ID, 0, func(e schema.Envelope) error {
		if err := c.st.Apply(&e); err != nil {
			return fmt.Errorf("fold stored seq %d: %w", e.Seq, err)
		}
		switch {
		case e.Type == schema.TypeSessionCreated:
			c.file = c.st.Meta.Labels[LabelSourceFile]
		case e.Type == schema.TypeTurnStarted && strings.HasSuffix(e.TurnID, continued):
			c.turns[rootTurn(e.TurnID)] = e.TurnID
		}
		if !e.Synthetic && !addedID(e.EventID) {
			c.ids = append(c.ids, e.EventID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", s.plan.ID, err)
	}
	return s.compareFrom(c)
}

// compareFrom compares the source events seen so far with the stored
// session c, and the rest as they come.
func (s *AppendSink) compareFrom(c *storedSession) error {
	s.mode, s.cmp = byID, c
	s.tail, s.tailID = c.st.LastSeq, c.st.LastEventID
	seen, held := s.seen, s.held
	s.seen, s.held = s.seen[:0], nil
	for i, id := range seen {
		e := schema.Envelope{Seq: s.plan.FirstSeq + uint64(i), EventID: id}
		if c.k >= len(c.ids) {
			// New: it must be one of those held whole.
			j := len(held) - (len(seen) - i)
			if j < 0 {
				return errReread
			}
			e = held[j]
		}
		if err := s.compareNext(e); err != nil {
			return err
		}
	}
	return nil
}

// EachStored gives fn the stored events of the pages next reads: next
// returns the raw events after a seq and whether another page follows
// (nothing, for a session that does not exist). The Log adapters read
// their sessions through it.
func EachStored(after uint64, next func(after uint64) (events []json.RawMessage, more bool, err error), fn func(schema.Envelope) error) error {
	for {
		page, more, err := next(after)
		if err != nil {
			return err
		}
		for _, raw := range page {
			e, err := schema.Decode(raw)
			if err != nil {
				return fmt.Errorf("stored event after seq %d: %w", after, err)
			}
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if !more || len(page) == 0 {
			return nil
		}
	}
}

// keepBeforeTail is how many source events before the stored tail's seq
// an AppendSink keeps whole while it compares by seq (at most
// maxHeldBytes of their data): the events a repair and a continuation
// add between the source's (a few each) put the source's new events
// there. A source whose new events were not kept is read again.
const (
	keepBeforeTail = 64
	maxHeldBytes   = 4 << 20
)

// errReread: the source's new events were passed over; ReadFile reads the
// file again, comparing by id from its start.
var errReread = errors.New("agentlog: the source's new events were passed over: read it again")

// sourceLikeID says whether id can be a source event's: "created", or
// "<key>.<n>".
func sourceLikeID(id string) bool {
	if id == "created" {
		return true
	}
	i := strings.LastIndexByte(id, '.')
	if i < 0 || i == len(id)-1 {
		return false
	}
	for _, c := range id[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// rootTurn is the source's turn id of a turn that continues it.
func rootTurn(id string) string {
	for strings.HasSuffix(id, continued) {
		id = strings.TrimSuffix(id, continued)
	}
	return id
}

// compareNext checks the next source event against the stored source
// events, and fits it to the session once they are all passed.
func (s *AppendSink) compareNext(e schema.Envelope) error {
	c := s.cmp
	if c.k < len(c.ids) {
		if c.ids[c.k] != e.EventID {
			return &DivergedError{Session: s.plan.ID, Seq: e.Seq, Stored: c.ids[c.k], Source: e.EventID, File: c.file}
		}
		c.k++
		return nil
	}
	c.k++
	return s.fit(e)
}

// fit appends a source event after a stored session that holds events the
// source does not have (a repair): see AppendSink.
func (s *AppendSink) fit(e schema.Envelope) error {
	st := s.cmp.st
	e.Seq, e.SessionID = 0, ""
	if st.Paused {
		d, _ := json.Marshal(schema.SessionResumed{By: s.by()})
		if err := s.put(schema.Envelope{Type: schema.TypeSessionResumed, EventID: e.EventID + idResumed, Time: e.Time, Data: d}); err != nil {
			return err
		}
	}
	if e.Type == schema.TypeToolResult && s.closedCall(e.ToolCallID) {
		return s.put(lateResult(e))
	}
	if e.TurnID != "" {
		if t, ok := s.cmp.turns[e.TurnID]; ok {
			e.TurnID = t
		}
		if e.Type != schema.TypeTurnStarted && st.Turn == nil && e.Type != schema.TypeTurnEnded {
			// The repair ended the turn the source goes on with.
			t := e.TurnID + continued
			if err := s.put(schema.Envelope{Type: schema.TypeTurnStarted, TurnID: t, EventID: e.EventID + idTurn, Time: e.Time, Data: json.RawMessage("{}")}); err != nil {
				return err
			}
			s.cmp.turns[rootTurn(t)] = t
			e.TurnID = t
		}
	}
	if e.Type == schema.TypeMessageAssistant && st.Check(&e) != nil {
		// Its attempt was interrupted by the repair, in the turn it ended.
		a := schema.Envelope{Type: schema.TypeAttemptStarted, TurnID: e.TurnID, AttemptID: e.AttemptID, EventID: e.EventID + idAttempt, Time: e.Time, Data: json.RawMessage("{}")}
		if st.Check(&a) == nil {
			if err := s.put(a); err != nil {
				return err
			}
		}
	}
	if err := st.Check(&e); err != nil {
		// Kept under its id, so that the stored session still holds
		// every source event.
		if s.Warn != nil {
			s.Warn(fmt.Sprintf("session %s: %s %s does not fit the session after its repair (%v): kept as %s", s.plan.ID, e.Type, e.EventID, err, TypeSourceUnfit))
		}
		d, _ := json.Marshal(SourceUnfit{Type: e.Type, Reason: err.Error()})
		return s.put(schema.Envelope{Type: TypeSourceUnfit, Ignorable: true, EventID: e.EventID, Time: e.Time, Data: d})
	}
	return s.put(e)
}

// TypeSourceUnfit is the ignorable event that stands for a source event
// that does not fit the stored session after a repair (a turn/ended of a
// turn the repair ended): it keeps the event's id, its type and why.
const TypeSourceUnfit = "source/unfit"

// SourceUnfit is the data of a source/unfit event.
type SourceUnfit struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// closedCall says whether the stored session has a result for call id
// (the source has none yet: it gives it now).
func (s *AppendSink) closedCall(id string) bool {
	st := s.cmp.st
	if !st.KnownTool(id) {
		return false
	}
	t, ok := st.Tools[id]
	return !ok || t.Phase == session.PhaseDone
}

// lateResult is a source's tool/result for a call a repair closed.
func lateResult(e schema.Envelope) schema.Envelope {
	var r schema.ToolResult
	_ = json.Unmarshal(e.Data, &r)
	d, _ := json.Marshal(schema.ToolLateResult{ToolCallID: e.ToolCallID, Status: r.Status, Output: r.Output})
	return schema.Envelope{Type: schema.TypeToolLateResult, Ignorable: true, EventID: e.EventID, Time: e.Time, Data: d}
}

func (s *AppendSink) by() string {
	if s.By == "" {
		return "sessionlog"
	}
	return s.By
}

// put folds e into the stored session's state and queues it.
func (s *AppendSink) put(e schema.Envelope) error {
	if err := s.cmp.st.Apply(&e); err != nil {
		return fmt.Errorf("session %s: %s %s: %w", s.plan.ID, e.Type, e.EventID, err)
	}
	if !addedID(e.EventID) {
		s.cmp.ids = append(s.cmp.ids, e.EventID)
	}
	return s.queue(e)
}

// queue adds e to the next append, sending the batch first when e would
// take it over MaxBytes, and after when it holds Batch events.
func (s *AppendSink) queue(e schema.Envelope) error {
	e.Seq, e.SessionID = 0, ""
	if e.Type == schema.TypeSessionCreated && s.File != "" {
		e.Data = withLabel(e.Data, LabelSourceFile, s.File)
	}
	n := eventBytes(&e, len(s.plan.ID))
	if s.MaxBytes > 0 && len(s.pending) > 0 && s.pendingBytes+n > s.MaxBytes {
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.pending = append(s.pending, e)
	s.pendingBytes += n
	if len(s.pending) >= s.batchSize() {
		return s.flush()
	}
	return nil
}

// withLabel sets a label of session/created data.
func withLabel(data json.RawMessage, k, v string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	labels := map[string]string{}
	_ = json.Unmarshal(m["labels"], &labels)
	labels[k] = v
	m["labels"], _ = json.Marshal(labels)
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}

// eventBytes bounds the encoded size of e in an append request: its data
// and ids as they are, and room for the fields the client fills in
// (schema version, session id, time) and the JSON around them.
func eventBytes(e *schema.Envelope, sessionIDLen int) int {
	return len(e.Data) + len(e.EventID) + len(e.Type) + len(e.TurnID) + len(e.StepID) + len(e.AttemptID) + len(e.ToolCallID) +
		sessionIDLen + 256
}

func (s *AppendSink) batchSize() int {
	if s.Batch <= 0 {
		return DefaultAppendBatch
	}
	return s.Batch
}

// flush sends the queued events once the append before them is answered;
// with InFlight it returns without waiting for their answer.
func (s *AppendSink) flush() error {
	if err := s.wait(); err != nil {
		return err
	}
	if len(s.pending) == 0 {
		return nil
	}
	events := s.pending
	s.pendingBytes = 0
	if s.InFlight == nil {
		last, dup, err := s.Log.Append(s.Ctx, s.plan.ID, s.tail, events)
		return s.answered(sentAppend{n: len(events), lastID: events[len(events)-1].EventID, last: last, duplicate: dup, err: err})
	}
	id, expected, n, lastID := s.plan.ID, s.tail, len(events), events[len(events)-1].EventID
	batch := events
	send := func(ctx context.Context) (uint64, bool, error) {
		return s.Log.Append(ctx, id, expected, batch)
	}
	if pl, ok := s.Log.(PreparingLog); ok {
		// Encoded before taking a slot: the slot is for the store.
		var err error
		if send, err = pl.PrepareAppend(id, expected, events); err != nil {
			return s.answered(sentAppend{n: n, lastID: lastID, err: err})
		}
		// The batch in flight is its encoding: the next is mapped into
		// the same array.
		s.pending = events[:0]
	} else {
		// The batch in flight keeps its array; the next is mapped into
		// another.
		s.pending = make([]schema.Envelope, 0, cap(events))
	}
	select {
	case s.InFlight <- struct{}{}:
	case <-s.Ctx.Done():
		return s.Ctx.Err()
	}
	done := make(chan sentAppend, 1)
	s.inflight = done
	go func() {
		last, dup, err := send(s.Ctx)
		<-s.InFlight
		done <- sentAppend{n: n, lastID: lastID, last: last, duplicate: dup, err: err}
	}()
	return nil
}

// wait takes the answer of the append in flight, if any.
func (s *AppendSink) wait() error {
	if s.inflight == nil {
		return nil
	}
	a := <-s.inflight
	s.inflight = nil
	return s.answered(a)
}

// answered moves the tail past an append's events.
func (s *AppendSink) answered(a sentAppend) error {
	if a.err != nil {
		return fmt.Errorf("append to %s after seq %d: %w", s.plan.ID, s.tail, a.err)
	}
	s.tail, s.tailID = a.last, a.lastID
	if !a.duplicate {
		s.added += a.n
	}
	if s.InFlight == nil {
		s.pending = s.pending[:0]
	}
	return nil
}

// Done appends what is queued, waits for its answer and reports the
// session. A source that ends before what is stored of it (the file
// shrank) is a *DivergedError.
func (s *AppendSink) Done() error {
	if s.mode == bySeq && s.tail > 0 {
		// The source ended before the stored tail's seq: compare what it
		// gave with the stored source events.
		if err := s.byID(); err != nil {
			return err
		}
	}
	if c := s.cmp; c != nil && c.k < len(c.ids) {
		return &DivergedError{Session: s.plan.ID, Seq: s.plan.FirstSeq + uint64(c.k), Stored: c.ids[c.k], File: c.file}
	}
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.wait(); err != nil {
		return err
	}
	s.unlock()
	if s.cmp != nil {
		s.Cache.keep(s.plan.ID, s.tail, s.tailID, s.cmp)
	}
	if s.Finished != nil {
		s.Finished(s.plan, s.tail, s.tailID, s.added)
	}
	return nil
}

// StoredCache keeps what AppendSinks read of stored sessions they
// compared by id, for the next sink that finds a session's tail as the
// last one left it: ship reads a file again on every write, and a session
// with a repair in it would otherwise be read whole each time. A nil
// StoredCache keeps nothing. Safe for concurrent use.
type StoredCache struct {
	mu sync.Mutex
	m  map[string]*cachedSession
}

// maxCachedSessions bounds a StoredCache.
const maxCachedSessions = 64

type cachedSession struct {
	tail   uint64
	tailID string
	c      *storedSession
}

// take takes the session's entry out when the tail is the one it was kept
// at.
func (sc *StoredCache) take(id string, tail uint64, tailID string) *storedSession {
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	cs, ok := sc.m[id]
	delete(sc.m, id)
	if !ok || cs.tail != tail || cs.tailID != tailID {
		return nil
	}
	return cs.c
}

func (sc *StoredCache) keep(id string, tail uint64, tailID string, c *storedSession) {
	if sc == nil {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil {
		sc.m = map[string]*cachedSession{}
	}
	for k := range sc.m {
		if len(sc.m) < maxCachedSessions {
			break
		}
		delete(sc.m, k)
	}
	sc.m[id] = &cachedSession{tail: tail, tailID: tailID, c: c}
}

// Close waits for an append an error elsewhere left in flight, so nothing
// of the sink outlives the read of its source.
func (s *AppendSink) Close() {
	_ = s.wait()
	s.unlock()
}

func (s *AppendSink) unlock() {
	if s.locked != "" {
		s.Locks.unlock(s.locked)
		s.locked = ""
	}
}

// SessionLocks is a lock per session id, shared by AppendSinks.
type SessionLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

func (l *SessionLocks) lock(ctx context.Context, id string) error {
	for {
		l.mu.Lock()
		ch, taken := l.held[id]
		if !taken {
			if l.held == nil {
				l.held = map[string]chan struct{}{}
			}
			l.held[id] = make(chan struct{})
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *SessionLocks) unlock(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.held[id])
	delete(l.held, id)
}

// ReadFile maps the file at path as ReadFile does, giving its sessions to
// sink (s itself, or a Sink that passes them on to s). With File set, a
// session the file no longer continues goes to the session's next
// generation, and a file whose session id another file holds goes to the
// id FileSessionID makes from its own name; Warn says so, naming the file.
func (s *AppendSink) ReadFile(f Format, path string, opt Options, sink Sink) (Result, error) {
	if sink == nil {
		sink = s
	}
	s.path = path
	for {
		res, err := ReadFile(f, path, opt, sink)
		s.Close()
		if errors.Is(err, errReread) && !s.compare[s.orig] {
			if s.compare == nil {
				s.compare = map[string]bool{}
			}
			s.compare[s.orig] = true
			continue
		}
		var de *DivergedError
		if s.File == "" || !errors.As(err, &de) {
			return res, err
		}
		if err := s.moveOn(path, de); err != nil {
			return res, err
		}
	}
}

// moveOn picks the session a file goes to after de, an error of the
// session announced last.
func (s *AppendSink) moveOn(path string, de *DivergedError) error {
	if s.instead == nil {
		s.instead, s.probe = map[string]generation{}, map[string]string{}
	}
	if de.File != "" && de.File != s.File {
		// Another file's session.
		own := FileSessionID(s.orig, s.File)
		if s.at.base == own {
			return &CollisionError{Session: de.Session, File: s.File, Other: de.File}
		}
		s.probe[s.orig] = own
		delete(s.instead, s.orig)
		if s.Warn != nil {
			s.Warn(fmt.Sprintf("%s: session %s is the session of another file (%s): this file goes to session %s", path, de.Session, de.File, own))
		}
		return nil
	}
	next := generation{base: s.at.base, n: s.at.n + 1}
	s.instead[s.orig] = next
	if s.Warn != nil {
		s.Warn(fmt.Sprintf("%s is no longer a continuation of session %s (%v): what it holds now goes to session %s", path, de.Session, de, next.id()))
	}
	return nil
}
