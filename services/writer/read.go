package writer

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// DefaultMaxReadBytes bounds a read reply when no connection says what the
// server takes (NATS's default max payload).
const DefaultMaxReadBytes = 1 << 20

// handleRead serves sessions.api.read (DESIGN.md section 12): one page of
// a session's stored events, so an agent reads its session without any
// JetStream permission.
func (s *Service) handleRead(ctx context.Context, m *nats.Msg) {
	var req ReadRequest
	if err := unmarshal(m.Data, &req); err != nil {
		s.respondErr(m.Reply, errorDetail(schema.Errorf(schema.CodeBadRequest, "request is not a valid read request: %v", err)))
		return
	}
	caller, err := api.CallerOf(m.Header.Values(api.RequestInfoHeader))
	fail := func(err error) {
		// A message names the session as the caller asked for it, never
		// by the stored id of an agent's tenant.
		s.respondErr(m.Reply, errorDetail(askedError(err, caller)))
	}
	if err == nil && !caller.Operator() {
		// The stored id of the session the agent names; the events go
		// out as stored, with that id.
		if req.SessionID, err = caller.StoredID(req.SessionID); err == nil && logstore.ValidateSessionID(req.SessionID) == nil {
			err = s.authorize(ctx, caller, req.SessionID)
		}
	}
	if err != nil {
		fail(err)
		return
	}
	page, err := ReadPage(ctx, s.st, req, int(s.nc.MaxPayload()))
	if err != nil {
		fail(err)
		return
	}
	page.SessionID = caller.WireID(page.SessionID)
	s.respond(m.Reply, EncodeReadReply(page))
}

// Read serves one page in process, as sessions.api.read would.
func (s *Service) Read(ctx context.Context, req ReadRequest) (ReadReply, error) {
	return ReadPage(ctx, s.st, req, int(s.nc.MaxPayload()))
}

// StoreReader reads pages straight from a store (processes that hold one
// and no writer); MaxBytes 0 means DefaultMaxReadBytes.
type StoreReader struct {
	Store    *logstore.Store
	MaxBytes int
}

// Read serves one page, as sessions.api.read would.
func (r StoreReader) Read(ctx context.Context, req ReadRequest) (ReadReply, error) {
	return ReadPage(ctx, r.Store, req, r.MaxBytes)
}

// readReplyFixed is the size of a reply without its session id and events,
// with the longest lastSeq and more.
var readReplyFixed = len(`{"sessionId":"","events":[],"lastSeq":18446744073709551615,"more":false}`)

// ReadPage returns the stored events of req.SessionID after req.AfterSeq,
// oldest first: at most req.Limit, and no more than fit in a reply of
// maxBytes (EncodeReadReply). The page is consistent up to the session's
// tail when the read began; LastSeq is that tail's seq. More is set only
// when an event after the page was seen. The answer is the one the judge
// gives reading the session from its start (DESIGN.md section 12).
func ReadPage(ctx context.Context, st *logstore.Store, req ReadRequest, maxBytes int) (ReadReply, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxReadBytes
	}
	limit := req.Limit
	switch {
	case req.SessionID == "":
		return ReadReply{}, schema.Errorf(schema.CodeBadRequest, "sessionId is required")
	case limit < 0 || limit > api.MaxReadLimit:
		return ReadReply{}, schema.Errorf(schema.CodeBadRequest, "limit %d is out of range 1..%d", limit, api.MaxReadLimit)
	case limit == 0:
		limit = api.DefaultReadLimit
	}
	if err := logstore.ValidateSessionID(req.SessionID); err != nil {
		return ReadReply{}, err
	}
	p := pager{st: st, sessionID: req.SessionID, afterSeq: req.AfterSeq, limit: limit, maxBytes: maxBytes}
	// A page after seq 0 is served from a batch only over a prefix this
	// store saw judged (logstore.PrefixJudged), which the subject's
	// message count, read before the tail, shows unchanged.
	p.judged, p.counted = st.JudgedThrough(req.SessionID)
	p.counted = p.counted && req.AfterSeq > 0
	// An erased session (or one being erased) answers erased, never a
	// part of its events. Its record and the count are read beside the
	// tail (one round trip instead of two or three); the events are read
	// only after all.
	erased, counted := make(chan error, 1), make(chan struct{})
	go func() { erased <- refuseErased(ctx, st, req.SessionID) }()
	go func() {
		defer close(counted)
		if p.counted {
			p.count, p.countErr = st.StoredCount(ctx, req.SessionID)
		}
	}()
	tail, err := st.Tail(ctx, req.SessionID)
	eerr := <-erased
	<-counted
	if eerr != nil {
		return ReadReply{}, eerr
	}
	if errors.Is(err, logstore.ErrUnreadable) {
		// The last stored message is not an event: the verdict names the
		// first bad message of the session.
		return ReadReply{}, readFailed(ctx, req.SessionID, st.FirstUnreadable(ctx, req.SessionID))
	}
	if err != nil {
		return ReadReply{}, schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
	}
	if !tail.Exists() {
		return ReadReply{}, schema.Errorf(schema.CodeNotFound, "session %s does not exist", req.SessionID)
	}
	p.tail = tail
	p.page = ReadReply{SessionID: req.SessionID, Events: []json.RawMessage{}, LastSeq: tail.Seq}
	p.budget = maxBytes - readReplyFixed - len(req.SessionID)
	served := false
	switch {
	case req.AfterSeq >= tail.Seq:
		// Nothing after the page's start: served when the events up to
		// the tail are still the ones judged (the count is the tail's
		// seq), or are found so now.
		switch {
		case !p.counted || p.countErr != nil:
		case tail.Seq <= p.judged.Seq:
			served = tail.StreamSeq <= p.judged.StreamSeq && p.count.N == p.judged.StoredBefore(tail.Seq+1) && p.count.First == p.judged.First
		default:
			ok, jerr := p.judgeUpTo(ctx, tail.Seq)
			served, err = ok && p.judged.StreamSeq == tail.StreamSeq, jerr
		}
	case req.AfterSeq == 0 || p.counted && p.countErr == nil:
		served, err = p.fromBatch(ctx)
	}
	if !served && (err == nil || errors.Is(err, logstore.ErrNotOnePerSeq)) {
		err = p.fromJudge(ctx)
	}
	if err != nil {
		return ReadReply{}, readFailed(ctx, req.SessionID, err)
	}
	if p.fullErr != nil {
		return ReadReply{}, p.fullErr
	}
	return p.page, nil
}

// pager builds one page of ReadPage.
type pager struct {
	st        *logstore.Store
	sessionID string
	afterSeq  uint64
	limit     int
	maxBytes  int
	tail      logstore.Tail
	// judged is the store's JudgedThrough when counted; count the
	// subject's StoredCount (countErr: not read), read before the tail.
	judged   logstore.JudgedPrefix
	counted  bool
	count    logstore.Count
	countErr error

	page    ReadReply
	budget  int   // for the events' bytes
	size    int   // of the events taken
	fullErr error // the page's first event does not fit in a reply
}

// take adds an event to the page unless the page is full; false when it
// is.
func (p *pager) take(body []byte, seq uint64) bool {
	if len(p.page.Events) == p.limit {
		p.page.More = true
		return false
	}
	n := len(body)
	if len(p.page.Events) > 0 {
		n++ // the comma
	}
	if p.size+n > p.budget {
		if len(p.page.Events) == 0 {
			p.fullErr = schema.Errorf(schema.CodeTooLarge, "the event at seq %d (%d bytes) does not fit in a read reply of %d bytes", seq, len(body), p.maxBytes)
			return false
		}
		p.page.More = true
		return false
	}
	p.size += n
	p.page.Events = append(p.page.Events, json.RawMessage(body))
	return true
}

// prefixRetries is how many times a batch is read again when the count
// says fewer messages precede the batch than were judged there (messages
// stored between the two reads do that too: the count is read again
// first), or when the batch came in more than one answer (a replica
// behind the leader answered, and the leader completed it), so that its
// answer counted nothing.
const prefixRetries = 1

// batch reads n events after seq after (> 0: the lead, within the judged
// prefix; 0: from the start) with ReadChained, up to maxBytes of bodies
// (0: no bound). ok is false when the prefix before the lead is not shown
// whole (logstore.PrefixJudged), or the bodies after it are not what the
// judge finds after it (chainedPage); last is the last event read.
func (p *pager) batch(ctx context.Context, after uint64, n, maxBytes int) (c logstore.Chained, last schema.Envelope, ok bool, err error) {
	c, err = p.st.ReadChained(ctx, p.sessionID, p.tail, after, n, maxBytes)
	for retry := 0; err == nil && after > 0 && !c.PrefixJudged(p.judged, after, p.count); retry++ {
		raced := c.Held > 0 && p.count.N < uint64(c.Held)+p.judged.StoredBefore(after)
		unheld := c.Held == 0 && after <= p.judged.Seq && p.count.First == p.judged.First
		if !raced && !unheld || retry == prefixRetries {
			return c, last, false, nil
		}
		if raced {
			if p.count, err = p.st.StoredCount(ctx, p.sessionID); err != nil {
				return c, last, false, nil
			}
		}
		c, err = p.st.ReadChained(ctx, p.sessionID, p.tail, after, n, maxBytes)
	}
	if err != nil {
		return c, last, false, err
	}
	last, ok = chainedPage(p.sessionID, after, c)
	return c, last, ok, nil
}

// note records the batch's events through last as judged: the prefix
// before its lead (after > 0) was, with the first message and the copies
// p.judged names, and each body after it is the judge's next event (no
// copy among them). A batch from the session's start holds its first
// message.
func (p *pager) note(c logstore.Chained, after uint64, last schema.Envelope) {
	if c.LastStreamSeq == 0 {
		return
	}
	first, copies := p.judged.First, p.judged.Copies
	if after == 0 {
		first, copies = logstore.FirstStored{StreamSeq: c.FirstStreamSeq, Hash: logstore.ChainHash(c.Bodies[0])}, nil
	}
	p.judged = logstore.JudgedPrefix{
		Tail:   logstore.Tail{Seq: last.Seq, StreamSeq: c.LastStreamSeq, EventID: last.EventID, Hash: logstore.ChainHash(c.Bodies[len(c.Bodies)-1])},
		First:  first,
		Copies: copies,
	}
	p.st.NoteJudged(p.sessionID, p.judged)
}

// judgeUpTo moves the judged prefix on to seq through, in batches of
// at most a page's limit of events read as a page is, none of them
// served: a reader that asks for pages ahead of the one it waits for
// (pkg/client's Load) then costs the events between, not the session
// from its start. false when a batch is in doubt.
func (p *pager) judgeUpTo(ctx context.Context, through uint64) (bool, error) {
	for {
		// Another read may have moved it on meanwhile.
		if w, ok := p.st.JudgedThrough(p.sessionID); ok && w.Seq > p.judged.Seq {
			p.judged = w
		}
		if p.judged.Seq >= through {
			return true, nil
		}
		n := int(min(through-p.judged.Seq, api.MaxReadLimit))
		c, last, ok, err := p.batch(ctx, p.judged.Seq, n, 0)
		if err != nil || !ok || len(c.Bodies) != n {
			return false, err
		}
		p.note(c, p.judged.Seq, last)
	}
}

// fromBatch serves the page from one batched get bounded by the tail read
// from the leader (logstore.ReadChained): a replica behind the leader is
// completed from the leader, so a page never ends early with more false,
// nor skips an event. It reads the event at afterSeq too (the lead) and
// the event after the page, which the judge reads before it stops (a
// message whose SL-Prev shows the page's last body changed).
//
// The judge reading from the session's start would accept the page when
// everything before the lead is what it accepted before (PrefixJudged;
// nothing precedes seq 1), and each body after the lead is the next event
// as the judge finds it (chainedPage). A page that reaches the tail must
// end with the tail's body. false (nothing taken) when any of it is in
// doubt: the judge then reads the page.
func (p *pager) fromBatch(ctx context.Context) (bool, error) {
	if ok, err := p.judgeUpTo(ctx, p.afterSeq); !ok || err != nil {
		return false, err
	}
	batch, last, ok, err := p.batch(ctx, p.afterSeq, p.limit+1, p.budget+1)
	if err != nil || !ok {
		return false, err
	}
	bodies := batch.Bodies
	switch end := p.afterSeq + uint64(len(bodies)); {
	case end == p.tail.Seq:
		// The tail must be the page's last event (or an exact copy of
		// it), not a message whose seq only says so.
		if logstore.ChainHash(bodies[len(bodies)-1]) != p.tail.Hash {
			return false, nil
		}
	default:
		// Short of the tail, a batch ends early only past the page's
		// limit or budget: otherwise the seqs are not what they say.
		read := 0
		for _, b := range bodies {
			read += len(b)
		}
		if len(bodies) != p.limit+1 && read <= p.budget {
			return false, nil
		}
	}
	p.note(batch, p.afterSeq, last)
	for i, b := range bodies {
		if !p.take(b, p.afterSeq+uint64(i)+1) {
			break
		}
	}
	if p.fullErr == nil && p.afterSeq+uint64(len(p.page.Events)) < p.tail.Seq {
		p.page.More = true
	}
	return true, nil
}

// fromJudge serves the page through the judge reading the session from its
// start: exactly the events before the first unreadable message, and
// that message's verdict when the page reaches it.
func (p *pager) fromJudge(ctx context.Context) error {
	p.page.Events, p.page.More, p.size, p.fullErr = p.page.Events[:0], false, 0, nil
	_, err := p.st.ReadJudged(ctx, &logstore.Judge{SessionID: p.sessionID}, func(m *logstore.Msg, ev *schema.Envelope) error {
		if ev.Seq <= p.afterSeq {
			return nil
		}
		if m.StreamSeq > p.tail.StreamSeq || !p.take(m.Data, ev.Seq) {
			return logstore.ErrStop
		}
		return nil
	})
	return err
}

// readFailed is the answer to a read that failed: an unreadable message's
// verdict as the judge gave it, else not_committed.
func readFailed(ctx context.Context, sessionID string, err error) error {
	switch {
	case err == nil:
		return schema.Errorf(schema.CodeNotCommitted, "cannot read the session %s", sessionID)
	case errors.Is(err, logstore.ErrUnreadable):
		return err
	case ctx.Err() != nil:
		return schema.Errorf(schema.CodeNotCommitted, "read %s: %v", sessionID, ctx.Err())
	}
	return schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
}

// chainedPage reports whether a batch read after seq afterSeq, up to
// the tail, is what the judge would find there after the lead, as far as
// the page goes: events of seqs afterSeq+1, ... (ReadChained holds their
// SL-Seq headers to it), each the session's next event (pageEvent) whose
// SL-Prev, when it has one, is the hash of the stored body before it
// (DESIGN.md section 2). last is the batch's last event.
func chainedPage(sessionID string, afterSeq uint64, b logstore.Chained) (last schema.Envelope, ok bool) {
	if len(b.Bodies) == 0 {
		return last, false
	}
	prev := b.PrevHash
	for i, body := range b.Bodies {
		if last, ok = pageEvent(sessionID, body, afterSeq+uint64(i)+1); !ok || (b.Prevs[i] != "" && prev != "" && b.Prevs[i] != prev) {
			return last, false
		}
		prev = logstore.ChainHash(body)
	}
	return last, true
}

// pageEvent reports whether a body read by seq is what the judge would
// find there, as far as a body without its headers tells: a body that
// decodes as the judge decodes it (its time, its data's depth and
// members included), an event of the session holding seq, of a type this
// reader knows or may skip. Its data is the body's.
func pageEvent(sessionID string, body []byte, seq uint64) (schema.Envelope, bool) {
	e, _, err := schema.DecodeCanonicalShared(body)
	return e, err == nil && e.SessionID == sessionID && e.Seq == seq && schema.Known(&e)
}

// EncodeReadReply renders a page without reflection: the stored events go
// out as stored, which is also what ReadPage's size budget counts.
func EncodeReadReply(r ReadReply) []byte {
	n := readReplyFixed + len(r.SessionID) + len(r.Events)
	for _, e := range r.Events {
		n += len(e)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"sessionId":`...)
	b = strconv.AppendQuote(b, r.SessionID) // session ids are [A-Za-z0-9_-]
	b = append(b, `,"events":[`...)
	for i, e := range r.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	b = append(b, `],"lastSeq":`...)
	b = strconv.AppendUint(b, r.LastSeq, 10)
	b = append(b, `,"more":`...)
	b = strconv.AppendBool(b, r.More)
	return append(b, '}')
}
