package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Reader reads a session's stored events a page at a time, as
// sessions.api.read answers (DESIGN.md section 12). *Client implements it
// over NATS; the writer's service implements it in process.
type Reader interface {
	Read(ctx context.Context, req api.ReadRequest) (api.ReadReply, error)
}

var _ Reader = (*Client)(nil)

// loadWindow is how many pages Load asks for at once after the first.
const loadWindow = 4

// Load rebuilds the session's State from the log, page by page through r.
// A session that does not exist loads as an empty state (Exists() false).
// A session holding an event this reader cannot decode or fold (a newer
// schema, an unknown required type) is refused with code unreadable,
// never guessed at.
//
// The first page tells the session's last seq and a page's size; the
// next pages are then asked for loadWindow at once, each after the seq a
// full page before it would end, and decoded as they arrive while the
// state folds the one before. A page is used only if it starts where the
// state stands: one that came back short (the reply's byte limit) leaves
// the pages guessed after it unused, and the load asks again from where
// it stands. Every page is an ordinary read, so the wire is exactly
// section 12's.
func Load(ctx context.Context, r Reader, sessionID string) (*session.State, error) {
	if !schema.ValidSessionID(sessionID) {
		return nil, errorf(schema.CodeBadRequest, "session id %q is not valid", schema.Clip(sessionID, 80))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // pages asked for and not used
	st := session.New(sessionID)
	asked := map[uint64]chan loadedPage{}
	ask := func(after uint64) chan loadedPage {
		if ch, ok := asked[after]; ok {
			return ch
		}
		ch := make(chan loadedPage, 1)
		asked[after] = ch
		go func() { ch <- readPage(ctx, r, sessionID, after) }()
		return ch
	}
	var after, size, last uint64
	for {
		page := <-ask(after)
		delete(asked, after)
		if page.err != nil {
			if CodeOf(page.err) == schema.CodeNotFound || schema.CodeOf(page.err) == schema.CodeNotFound {
				return st, nil
			}
			var ce *Error
			if errors.As(page.err, &ce) {
				return nil, page.err
			}
			if c := schema.CodeOf(page.err); c != schema.CodeInternal {
				// A contract error from a reader in process (the judge's
				// unreadable, …): the client's error of that code.
				return nil, errorf(c, "%v", page.err)
			}
			return nil, fmt.Errorf("client: load %s: %w", sessionID, page.err)
		}
		for i := range page.events {
			if page.bad == i {
				return nil, errorf(schema.CodeUnreadable, "session %s after seq %d: %v", sessionID, st.LastSeq, page.badErr)
			}
			// An agent of a tenant reads its session as stored, under
			// _T<tenant>_<id> (ADR 010): the state keeps the id it asked by.
			e := &page.events[i]
			e.SessionID = api.AskedID(e.SessionID, sessionID)
			if err := st.Apply(&page.events[i]); err != nil {
				return nil, errorf(schema.CodeUnreadable, "session %s seq %d does not fold: %v", sessionID, page.events[i].Seq, err)
			}
		}
		if !page.more {
			return st, nil
		}
		if len(page.events) == 0 || st.LastSeq <= after {
			return nil, errorf(schema.CodeInternal, "session %s: a read page after seq %d said more but moved nothing", sessionID, after)
		}
		if after == 0 {
			size, last = uint64(len(page.events)), page.lastSeq
		}
		after = st.LastSeq
		for k := range asked {
			if k < after {
				delete(asked, k) // guessed after a short page: not used
			}
		}
		for i := uint64(0); i < loadWindow && after+i*size < last; i++ {
			ask(after + i*size)
		}
	}
}

// loadedPage is one page read and decoded. bad is the index of the first
// event that does not decode (-1: none); events stop there.
type loadedPage struct {
	events  []schema.Envelope
	lastSeq uint64
	more    bool
	bad     int
	badErr  error
	err     error
}

// readPage reads the page after seq after and decodes its events.
func readPage(ctx context.Context, r Reader, sessionID string, after uint64) loadedPage {
	var reply api.ReadReply
	var err error
	if c, ok := r.(*Client); ok {
		reply, err = c.readUnchecked(ctx, api.ReadRequest{SessionID: sessionID, AfterSeq: after})
	} else {
		reply, err = r.Read(ctx, api.ReadRequest{SessionID: sessionID, AfterSeq: after})
	}
	if err != nil {
		return loadedPage{err: err}
	}
	p := loadedPage{events: make([]schema.Envelope, len(reply.Events)), lastSeq: reply.LastSeq, more: reply.More, bad: -1}
	for i, b := range reply.Events {
		e, err := schema.Decode(b)
		if err != nil {
			// The events before it fold first, as they would one by one.
			p.bad, p.badErr, p.events = i, err, p.events[:i+1]
			break
		}
		p.events[i] = e
	}
	return p
}

// Read asks the writer for one page of a session (sessions.api.read). A
// session that does not exist is ErrNotFound. Reads change nothing, so a
// lost answer is simply asked again.
func (c *Client) Read(ctx context.Context, req api.ReadRequest) (api.ReadReply, error) {
	prev, _ := c.acks.get(req.SessionID)
	r, err := call[api.ReadReply](ctx, c, api.SubjectRead, req)
	if err == nil {
		err = checkRead(req.SessionID, prev, req, r)
	}
	return r, err
}

// List asks the projector for one page of the sessions the client's
// user may read (sessions.api.list, DESIGN.md section 12): an agent's
// own and those granted to it, named as it names them. Lists change
// nothing, so a lost answer is simply asked again.
func (c *Client) List(ctx context.Context, req api.ListRequest) (api.ListReply, error) {
	return call[api.ListReply](ctx, c, api.SubjectList, req)
}

// ListAll pages through List and returns every session listed.
func (c *Client) ListAll(ctx context.Context) ([]api.ListedSession, error) {
	var out []api.ListedSession
	req := api.ListRequest{Limit: api.MaxListLimit}
	for {
		page, err := c.List(ctx, req)
		if err != nil {
			return out, err
		}
		out = append(out, page.Sessions...)
		if page.Next == "" || len(page.Sessions) == 0 {
			return out, nil
		}
		req.After = page.Next
	}
}

// LoadState implements StateLoader (for Recover) through the client's own
// connection: the writer reads the log for it, so the client's user needs
// no JetStream permission.
func (c *Client) LoadState(ctx context.Context, sessionID string) (*session.State, error) {
	return Load(ctx, c, sessionID)
}

// readUnchecked is Read for Load: the reply's events are cut out of it
// without checking that each is JSON, which schema.Decode checks anyway
// (json.Unmarshal would scan the reply twice and copy every event).
func (c *Client) readUnchecked(ctx context.Context, req api.ReadRequest) (api.ReadReply, error) {
	prev, _ := c.acks.get(req.SessionID)
	r, err := call[uncheckedReply](ctx, c, api.SubjectRead, req)
	if err == nil {
		err = checkRead(req.SessionID, prev, req, r.ReadReply)
	}
	return r.ReadReply, err
}

// replyDecoder is a reply that decodes itself (Client.once).
type replyDecoder interface {
	decodeReply(b []byte) error
}

// uncheckedReply decodes a read reply in the layout the writer writes
// (`{"sessionId":"…","events":[…],"lastSeq":N,"more":B}`, no spaces),
// its events as slices of b; any other layout goes through json.Unmarshal.
type uncheckedReply struct{ api.ReadReply }

func (r *uncheckedReply) decodeReply(b []byte) error {
	if r.cut(b) {
		return nil
	}
	r.ReadReply = api.ReadReply{}
	return json.Unmarshal(b, &r.ReadReply)
}

// cut reads b in the writer's layout; false if b is not in it.
func (r *uncheckedReply) cut(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte(`{"sessionId":`))
	if !ok {
		return false
	}
	if r.SessionID, rest, ok = cutPlainString(rest); !ok {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"events":[`)); !ok {
		return false
	}
	r.Events = []json.RawMessage{}
	for len(rest) > 0 && rest[0] != ']' {
		if len(r.Events) > 0 {
			if rest[0] != ',' {
				return false
			}
			rest = rest[1:]
		}
		n := objectEnd(rest)
		if n < 0 {
			return false
		}
		r.Events = append(r.Events, json.RawMessage(rest[:n]))
		rest = rest[n:]
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`],"lastSeq":`)); !ok {
		return false
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return false
	}
	r.LastSeq = seq
	switch string(rest[i:]) {
	case `,"more":true}`:
		r.More = true
	case `,"more":false}`:
		r.More = false
	default:
		return false
	}
	return true
}

// objectEnd is the length of the JSON object b starts with, found by its
// braces outside strings (its content is checked by whoever decodes it);
// -1 if b does not start with one that ends.
func objectEnd(b []byte) int {
	if len(b) == 0 || b[0] != '{' {
		return -1
	}
	depth, str := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case str:
			if c == '\\' {
				i++
			} else if c == '"' {
				str = false
			}
		case c == '"':
			str = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}
