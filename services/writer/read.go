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
	if err == nil && !caller.Operator() {
		// The stored id of the session the agent names; the events go
		// out as stored, with that id.
		if req.SessionID, err = caller.StoredID(req.SessionID); err == nil && logstore.ValidateSessionID(req.SessionID) == nil {
			err = s.authorize(ctx, caller, req.SessionID)
		}
	}
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	page, err := ReadPage(ctx, s.st, req, int(s.nc.MaxPayload()))
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
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
// when an event after the page was seen.
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
	// An erased session (or one being erased) answers erased, never a
	// part of its events. Its record is read beside the tail (one round
	// trip instead of two); the events are read only after both.
	erased := make(chan error, 1)
	go func() { erased <- refuseErased(ctx, st, req.SessionID) }()
	tail, err := st.Tail(ctx, req.SessionID)
	if eerr := <-erased; eerr != nil {
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
	page := ReadReply{SessionID: req.SessionID, Events: []json.RawMessage{}, LastSeq: tail.Seq}
	if req.AfterSeq >= tail.Seq {
		return page, nil
	}
	budget := maxBytes - readReplyFixed - len(req.SessionID)
	size := 0
	// take adds an event to the page unless the page is full; false when
	// it is.
	var fullErr error
	take := func(body []byte, seq uint64) bool {
		if len(page.Events) == limit {
			page.More = true
			return false
		}
		n := len(body)
		if len(page.Events) > 0 {
			n++ // the comma
		}
		if size+n > budget {
			if len(page.Events) == 0 {
				fullErr = schema.Errorf(schema.CodeTooLarge, "the event at seq %d (%d bytes) does not fit in a read reply of %d bytes", seq, len(body), maxBytes)
				return false
			}
			page.More = true
			return false
		}
		size += n
		page.Events = append(page.Events, json.RawMessage(body))
		return true
	}
	// The page's events are read with one batched get bounded by the tail
	// read from the leader above (logstore.ReadChained): a replica behind
	// the leader is completed from the leader, so a page never ends early
	// with more false, nor skips an event. Each event is checked as the
	// judge would check it after the one before (chainedPage): its body
	// (session, seq, type), its SL-Seq and its SL-Prev, the first one's
	// against the stored event at AfterSeq, which the batch reads too. The
	// batch also reads the event after the page, which the judge reads
	// before it stops (a message whose SL-Prev shows the page's last body
	// changed). A page that reaches the tail must end with the tail's body.
	// Any doubt sends the read through the judge from the session's start,
	// which serves exactly the events before the first unreadable message
	// and answers that message's verdict when the page reaches it.
	batch, err := st.ReadChained(ctx, req.SessionID, tail, req.AfterSeq, limit+1, budget+1)
	bodies := batch.Bodies
	judged := err == nil && chainedPage(req.SessionID, req.AfterSeq, batch)
	switch end := req.AfterSeq + uint64(len(bodies)); {
	case !judged:
	case end == tail.Seq:
		// The tail must be the page's last event (or an exact copy of
		// it), not a message whose seq only says so.
		judged = logstore.ChainHash(bodies[len(bodies)-1]) == tail.Hash
	default:
		// Short of the tail, a batch ends early only past the page's
		// limit or budget: otherwise the seqs are not what they say.
		read := 0
		for _, b := range bodies {
			read += len(b)
		}
		judged = len(bodies) == limit+1 || read > budget
	}
	if judged {
		for i, b := range bodies {
			if !take(b, req.AfterSeq+uint64(i)+1) {
				break
			}
		}
		if fullErr == nil && req.AfterSeq+uint64(len(page.Events)) < tail.Seq {
			page.More = true
		}
	} else if err == nil || errors.Is(err, logstore.ErrNotOnePerSeq) {
		page.Events, page.More, size, fullErr = page.Events[:0], false, 0, nil
		_, err = st.ReadJudged(ctx, &logstore.Judge{SessionID: req.SessionID}, func(m *logstore.Msg, ev *schema.Envelope) error {
			if ev.Seq <= req.AfterSeq {
				return nil
			}
			if m.StreamSeq > tail.StreamSeq || !take(m.Data, ev.Seq) {
				return logstore.ErrStop
			}
			return nil
		})
	}
	if err != nil {
		return ReadReply{}, readFailed(ctx, req.SessionID, err)
	}
	if fullErr != nil {
		return ReadReply{}, fullErr
	}
	return page, nil
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
// the tail, is what the judge would find there, as far as the page goes:
// events of seqs afterSeq+1, ... (ReadChained holds their SL-Seq headers
// to it), each the session's next event (pageEvent) whose SL-Prev, when
// it has one, is the hash of the stored body before it (DESIGN.md
// section 2).
func chainedPage(sessionID string, afterSeq uint64, b logstore.Chained) bool {
	if len(b.Bodies) == 0 {
		return false
	}
	prev := b.PrevHash
	for i, body := range b.Bodies {
		if !pageEvent(sessionID, body, afterSeq+uint64(i)+1) || (b.Prevs[i] != "" && prev != "" && b.Prevs[i] != prev) {
			return false
		}
		prev = logstore.ChainHash(body)
	}
	return true
}

// pageEvent reports whether a body read by seq is what the judge would
// find there, as far as a body without its headers tells: an event of
// the session, holding seq, of a type this reader knows or may skip.
func pageEvent(sessionID string, body []byte, seq uint64) bool {
	if c, ok := schema.ScanCanonical(body); ok {
		return c.SessionIs(sessionID) && c.Seq == seq && schema.Known(&schema.Envelope{Type: c.Type(), Ignorable: c.Ignorable}) && json.Valid(body)
	}
	e, err := schema.Decode(body)
	return err == nil && e.SessionID == sessionID && e.Seq == seq && schema.Known(&e)
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
