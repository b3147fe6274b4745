package source

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/clientlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The source endpoints (DESIGN.md section 15) serve an agent's own
// transcript entries, mapped by pkg/agentlog exactly as `import` maps the
// agent's file.

// sourceSession is the session a transcript key maps to: the id the format
// gives the file the key names (<sessionKey>.jsonl, or <sessionKey>/<subpath>.jsonl).
func sourceSession(k api.SourceKey) (agentlog.Format, string, error) {
	f, ok := formats.Lookup(k.Format)
	if !ok {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "unknown format %q", k.Format)
	}
	if err := checkProject(k.Format, k.ProjectKey); err != nil {
		return nil, "", err
	}
	if k.SessionKey == "" || path.Base(k.SessionKey) != k.SessionKey || k.SessionKey == "." || k.SessionKey == ".." {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "sessionKey %q is not a file name", k.SessionKey)
	}
	if len(k.SessionKey) > maxSourceSessionKey || len(k.Subpath) > maxSourceSubpath {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "sessionKey over %d bytes or subpath over %d", maxSourceSessionKey, maxSourceSubpath)
	}
	p := "/" + k.SessionKey + ".jsonl"
	if k.Subpath != "" {
		clean := path.Clean(k.Subpath)
		if clean != k.Subpath || path.IsAbs(clean) || clean == ".." || len(clean) > 2 && clean[:3] == "../" {
			return nil, "", schema.Errorf(schema.CodeBadRequest, "subpath %q is not a relative path", k.Subpath)
		}
		p = "/" + k.SessionKey + "/" + clean + ".jsonl"
	}
	id, err := f.SessionID(p, nil)
	if err != nil || !schema.ValidSessionID(id) {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "key %s/%s gives no session id", k.SessionKey, k.Subpath)
	}
	return f, id, nil
}

// Bounds of the source appends that read a whole transcript to map it
// again: an agent can make a session as long as it likes, and would
// otherwise make the service read and map it whole, on every append that
// has no mapping state kept, as many at once as it asks. Such an append
// holds a page of the session's events at a time (its lines go to the
// file it maps), the identity of each entry and the mapping's state.
// Config.MaxSourceBytes bounds the bytes one reads, sourceRemaps how many
// run at once.
const sourceRemaps = 2

// storedEvents reads the stored events of a session (the writer's id for
// it: scope.asked) a page at a time, as agentlog.Events: none when it has
// none. It refuses one whose events hold more than the service's
// MaxSourceBytes, or that the writer no longer finds after its first
// page (gone is set: what the read gave is not the session).
func (s *Service) storedEvents(ctx context.Context, sc scope, id string, gone *bool) agentlog.Events {
	return func(after uint64, fn func(*schema.Envelope) error) error {
		size := 0
		err := agentlog.EachStored(after, func(after uint64) ([]json.RawMessage, bool, error) {
			page, err := s.read(ctx, sc, api.ReadRequest{SessionID: id, AfterSeq: after})
			if schema.CodeOf(err) == schema.CodeNotFound {
				*gone = true
				return nil, false, errGone
			}
			for _, raw := range page.Events {
				if size += len(raw); size > s.cfg.MaxSourceBytes {
					return nil, false, schema.Errorf(schema.CodeTooLarge, "session %s holds over %d bytes: too large to map again through the source endpoints (ship or import its file)", id, s.cfg.MaxSourceBytes)
				}
			}
			return page.Events, page.More, err
		}, func(e schema.Envelope) error { return fn(&e) })
		if errors.Is(err, agentlog.ErrStop) {
			return nil
		}
		return err
	}
}

// errGone ends a read of a session the writer does not find.
var errGone = errors.New("source: no such session")

// SourceLoad returns a page of the verbatim entries of a transcript: the
// lines of its source/line events after the cursor (a seq), as many as fit
// in one reply. A line kept in parts (one over the event size limit) comes
// whole when it fits, else as pieces of its text a page each. The session
// is read a page at a time, so a load holds about one reply in memory
// however long the transcript. An erased session loads as never written.
// It loads as an operator (SourceLoadAs).
func (s *Service) SourceLoad(ctx context.Context, req api.SourceLoadRequest) (api.SourceLoadReply, error) {
	return s.SourceLoadAs(ctx, api.Caller{}, req)
}

// sourceScope is the scope of a request of caller naming key k: the
// format, the session's id on the wire and as the writer is asked for
// it, its stored id, and the key as the index holds it.
func sourceScope(caller api.Caller, k api.SourceKey) (f agentlog.Format, sc scope, id, asked, stored string, ik api.SourceKey, err error) {
	if f, id, err = sourceSession(k); err != nil {
		return
	}
	if sc, err = scopeOf(caller, k.ProjectKey); err != nil {
		return
	}
	if stored, err = sc.storedID(id); err != nil {
		return
	}
	return f, sc, id, sc.asked(id, stored), stored, sc.key(k), nil
}

// SourceLoadAs is SourceLoad for caller: the key is its tenant's, and the
// session is read as the caller reads it (another agent's is refused
// forbidden, unless it grants the caller).
func (s *Service) SourceLoadAs(ctx context.Context, caller api.Caller, req api.SourceLoadRequest) (api.SourceLoadReply, error) {
	f, sc, _, id, stored, k, err := sourceScope(caller, req.SourceKey)
	if err != nil {
		return api.SourceLoadReply{}, err
	}
	none := api.SourceLoadReply{Entries: []json.RawMessage{}}
	if _, err := s.sourceOwner(ctx, sc, k, id, stored, false); schema.CodeOf(err) == schema.CodeConflict {
		// Another project's session: this key was never written.
		return none, nil
	} else if err != nil {
		return api.SourceLoadReply{}, err
	}
	var after uint64
	if req.Cursor != "" {
		if after, err = strconv.ParseUint(req.Cursor, 10, 64); err != nil || after == 0 {
			return api.SourceLoadReply{}, schema.Errorf(schema.CodeBadRequest, "cursor %q is not one this service gave", req.Cursor)
		}
	}
	maxBytes := int(s.nc.MaxPayload())
	pg := loadPage{format: f.Name(), budget: maxBytes - sourceLoadSlack, last: after}
	for {
		page, err := s.read(ctx, sc, api.ReadRequest{SessionID: id, AfterSeq: after})
		if c := schema.CodeOf(err); err != nil && req.Cursor == "" && (c == schema.CodeNotFound || c == schema.CodeErased) {
			return none, nil
		} else if err != nil {
			return api.SourceLoadReply{}, err
		}
		for _, raw := range page.Events {
			e, err := schema.Decode(raw)
			if err != nil {
				return api.SourceLoadReply{}, err
			}
			if !pg.add(&e) {
				return pg.reply(id, true)
			}
			after = e.Seq
		}
		if !page.More || len(page.Events) == 0 {
			if req.Cursor == "" && !pg.lines {
				return none, nil // no line of the format: not a transcript
			}
			return pg.reply(id, false)
		}
	}
}

// sourceLoadSlack is the room a load reply keeps for all but its entries.
const sourceLoadSlack = 4 << 10

// loadPage gathers one page of a source load.
type loadPage struct {
	format string
	budget int
	// last is the seq the next page starts after; lines says a line of
	// the format was seen.
	last  uint64
	lines bool

	entries []json.RawMessage
	size    int
	// A line kept in parts being put together: its text so far, the
	// length and seq of its first part, and the seq before it (where a
	// page that cannot hold it ends).
	parts               []byte
	inLine              bool
	firstLen            int
	firstSeq, partsFrom uint64
	// piece: the page is one part of a line too large for a page.
	piece *api.SourcePart
}

// add takes the next stored event; false when the page is full: the
// event is not in it, and last says where the next page starts.
func (p *loadPage) add(e *schema.Envelope) bool {
	var d agentlog.SourceLine
	if e.Type != agentlog.TypeSourceLine || json.Unmarshal(e.Data, &d) != nil || d.Format != p.format {
		p.last = e.Seq
		return true
	}
	p.lines = true
	switch {
	case p.piece != nil:
		return false // a piece is a page of its own
	case d.Parts == 0:
		n := encodedLen(d.Line)
		if len(p.entries) > 0 && p.size+n > p.budget {
			return false
		}
		p.entries = append(p.entries, d.Line)
		p.size += n + 1
		p.last = e.Seq
		return true
	case d.Part > 1 && !p.inLine:
		// The page starts inside a line sent in pieces.
		if len(p.entries) > 0 {
			return false
		}
		p.piece = &api.SourcePart{Text: d.Text, Last: d.Part == d.Parts}
		p.last = e.Seq
		return true
	case d.Part == 1:
		p.parts, p.inLine, p.firstLen, p.firstSeq, p.partsFrom = append(p.parts[:0], d.Text...), true, len(d.Text), e.Seq, p.last
	default:
		p.parts = append(p.parts, d.Text...)
	}
	done := d.Part == d.Parts
	if n := encodedLen(p.parts); n+p.size <= p.budget || (done && len(p.entries) == 0 && n <= p.budget) {
		if done {
			p.entries = append(p.entries, json.RawMessage(p.parts))
			p.size += n + 1
			p.parts, p.inLine = nil, false
		}
		p.last = e.Seq
		return true
	}
	// The line does not fit: the page ends before it, or, holding
	// nothing else, is its first part.
	if len(p.entries) > 0 {
		p.last = p.partsFrom
		return false
	}
	p.piece = &api.SourcePart{Text: string(p.parts[:p.firstLen]), Last: done && p.firstSeq == e.Seq}
	p.last = p.firstSeq
	return false
}

// reply is the page; more says the transcript goes on after it.
func (p *loadPage) reply(id string, more bool) (api.SourceLoadReply, error) {
	r := api.SourceLoadReply{SessionID: id, Found: true, Entries: p.entries, Part: p.piece}
	if r.Entries == nil {
		r.Entries = []json.RawMessage{}
	}
	if more {
		r.Next = strconv.FormatUint(p.last, 10)
	}
	return r, nil
}

// encodedLen is the length of JSON text b in a reply (encoding/json
// writes <, >, & and U+2028, U+2029 as \u escapes).
func encodedLen(b []byte) int {
	n := len(b)
	for i, c := range b {
		switch {
		case c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			n += 3
		}
	}
	return n
}

func (s *Service) handleSourceLoad(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "load", s.SourceLoadAs)
}

// sourceBatch is the events per atomic append of a source append.
const sourceBatch = 500

// SourceAppend appends a transcript's new entries as `import` maps the
// file they extend, through the step import and ship share
// (agentlog.AppendSink): the stored entries followed by the new ones give
// the events, and what is not stored yet of each session they give is
// appended (one session: a transcript is one session, its rewinds
// context/rewound in it). An entry whose key (uuid) or text is stored already adds
// nothing. The first append of a key records its project in the source
// index; a key of another project that maps to the same session is refused.
//
// The mapping state after an append is kept (sourceCont), so the next
// append of the transcript maps only its new entries, unless the session
// moved on since (another writer, a repair) or an entry does not decode
// as a line of the file: then the stored entries are read and mapped again.
// It appends as an operator (SourceAppendAs).
func (s *Service) SourceAppend(ctx context.Context, req api.SourceAppendRequest) (api.SourceAppendReply, error) {
	return s.SourceAppendAs(ctx, api.Caller{}, req)
}

// SourceAppendAs is SourceAppend for caller: the key is its tenant's, and
// the session is read and appended as the caller appends (another agent's
// is refused forbidden, unless it grants the caller; a session it creates
// records it as the owner; its tenant's limits hold).
func (s *Service) SourceAppendAs(ctx context.Context, caller api.Caller, req api.SourceAppendRequest) (api.SourceAppendReply, error) {
	f, sc, wireID, id, stored, k, err := sourceScope(caller, req.SourceKey)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	entries := make([][]byte, len(req.Entries))
	for i, e := range req.Entries {
		var c bytes.Buffer
		if err := json.Compact(&c, e); err != nil || !bytes.HasPrefix(c.Bytes(), []byte("{")) {
			return api.SourceAppendReply{}, schema.Errorf(schema.CodeBadRequest, "entry %d is not a JSON object", i)
		}
		entries[i] = c.Bytes()
	}
	if err := s.mayCreate(ctx, sc, id, stored); err != nil {
		return api.SourceAppendReply{}, err
	}
	owner, err := s.sourceOwner(ctx, sc, k, id, stored, true)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	sess := sourceSess{sc: sc, wire: wireID, asked: id, stored: stored}
	var (
		rep api.SourceAppendReply
		ok  bool
	)
	if len(entries) == 0 {
		// The key alone (what ship and import send once a file is in):
		// nothing to map, so the stored transcript is not read.
		rep, err = s.sourceTail(ctx, sc, id)
	} else if rep, ok, err = s.continueSource(ctx, sess, entries); err == nil && !ok {
		rep, err = s.remapSource(ctx, sess, f, req.SourceKey, entries)
	}
	if err != nil {
		s.dropOwner(ctx, stored, owner, err)
		return api.SourceAppendReply{}, err
	}
	if rep.Appended > 0 || owner != nil {
		if err := s.indexSource(ctx, sc, k, stored); err != nil {
			return api.SourceAppendReply{}, err
		}
	}
	return rep, nil
}

// sourceTail is the answer to an append without entries: the session's
// stored tail (an erased session is refused as a read refuses it: it is
// the writer's read of one event).
func (s *Service) sourceTail(ctx context.Context, sc scope, id string) (api.SourceAppendReply, error) {
	page, err := s.read(ctx, sc, api.ReadRequest{SessionID: id, Limit: 1})
	if err != nil && schema.CodeOf(err) != schema.CodeNotFound {
		return api.SourceAppendReply{}, err
	}
	return api.SourceAppendReply{SessionID: id, LastSeq: page.LastSeq}, nil
}

// read is one page of the session's stored events, read by the writer
// (sessions.api.read) as sc's caller, with the writer's refusals.
func (s *Service) read(ctx context.Context, sc scope, req api.ReadRequest) (api.ReadReply, error) {
	page, err := s.clientOf(sc).Read(ctxOf(ctx, sc), req)
	return page, fromClient(err)
}

// sourceSess is the session a source append writes: its scope, its id on
// the wire (the id the mapping gives its events), the id the writer is
// asked for, and its stored id.
type sourceSess struct {
	sc                  scope
	wire, asked, stored string
}

// maxStateEntries bounds the entries of one transcript whose mapping
// state is kept (Config.SourceStates bounds the transcripts): a longer
// transcript is mapped again on each append rather than held (an agent
// cannot make the service hold more than about SourceStates x
// maxStateEntries keys).
const maxStateEntries = 20_000

// sourceCont is a transcript's mapping state after its last append
// through this service: valid while the session's tail is still tail, for
// the caller whose append it followed (another caller's append maps the
// stored transcript again, which the writer reads as that caller: the
// kept state never answers for a caller the writer has not judged).
type sourceCont struct {
	c      *agentlog.Continuation
	t      *transcript
	tail   uint64
	tailID string
	caller api.Caller
}

// transcript is what a source append knows of a transcript's stored
// entries: the identity of each, in order.
type transcript struct {
	id    func([]byte) string
	ids   []string       // per stored entry
	keyed map[string]int // the index of each keyed entry
}

// newTranscript is an empty transcript of format f: an entry's identity
// is its key (uuid) when the format gives one, else a hash of its text.
func newTranscript(f agentlog.Format) *transcript {
	m := f.NewMapper("")
	return &transcript{keyed: map[string]int{}, id: func(raw []byte) string {
		if l, err := m.Decode(raw); err == nil && l.Key != "" {
			return "k:" + l.Key
		}
		h := sha256.Sum256(raw)
		return "t:" + string(h[:])
	}}
}

func isKeyed(id string) bool { return id[0] == 'k' }

// add records the next stored entry.
func (t *transcript) add(id string) {
	if isKeyed(id) {
		t.keyed[id] = len(t.ids)
	}
	t.ids = append(t.ids, id)
}

// fresh says which entries of a batch (given by their identities) are not
// stored yet. A keyed entry is stored when its key is (or an earlier
// entry of the batch has it). An entry without a key is new each time it
// is sent (the SDK asks stores to append those without dedup: a title set
// back to an earlier one is a new entry), unless the batch replays stored
// entries (importSessionToStore again): the nearest keyed entry before it
// in the batch (else after it), when stored, places it, and it is stored
// when the entry at that place has the same text. A batch of entries
// without keys that the transcript ends with already is a retry of the
// last append and adds nothing.
func (t *transcript) fresh(ids []string) []bool {
	out := make([]bool, len(ids))
	next := make([]int, len(ids)) // the nearest keyed entry at or after each
	n := -1
	for j := len(ids) - 1; j >= 0; j-- {
		if isKeyed(ids[j]) {
			n = j
		}
		next[j] = n
	}
	if n < 0 && len(ids) <= len(t.ids) && slices.Equal(ids, t.ids[len(t.ids)-len(ids):]) {
		return out
	}
	inBatch := map[string]bool{}
	prev := -1
	for j, id := range ids {
		out[j] = true
		if isKeyed(id) {
			_, stored := t.keyed[id]
			out[j] = !stored && !inBatch[id]
			inBatch[id] = true
			prev = j
			continue
		}
		a := prev
		if a < 0 {
			a = next[j]
		}
		if a < 0 {
			continue
		}
		if p, stored := t.keyed[ids[a]]; stored {
			if q := p + j - a; q >= 0 && q < len(t.ids) && t.ids[q] == id {
				out[j] = false
			}
		}
	}
	return out
}

// takeCont takes the session's mapping state (by stored id) out of the
// cache (of two concurrent appends, one gets it; the other maps the
// transcript again); nil when it was another caller's.
func (s *Service) takeCont(stored string, caller api.Caller) *sourceCont {
	sc, ok := s.conts.Get(stored)
	if !ok || !s.conts.Remove(stored) || sc.caller != caller {
		return nil
	}
	return sc
}

// continueSource appends entries with the kept mapping state; ok is false
// when there is none that holds (nothing was appended then).
func (s *Service) continueSource(ctx context.Context, ss sourceSess, entries [][]byte) (api.SourceAppendReply, bool, error) {
	sc := s.takeCont(ss.stored, ss.sc.caller)
	if sc == nil {
		return api.SourceAppendReply{}, false, nil
	}
	t, err := s.st.Tail(ctx, ss.stored)
	if err != nil || t.Seq != sc.tail || t.EventID != sc.tailID {
		return api.SourceAppendReply{}, false, nil
	}
	rep := api.SourceAppendReply{SessionID: ss.asked, LastSeq: t.Seq}
	var events []schema.Envelope
	emit := func(e schema.Envelope) error { events = append(events, e); return nil }
	ids := make([]string, len(entries))
	for i, raw := range entries {
		ids[i] = sc.t.id(raw)
	}
	fresh := sc.t.fresh(ids)
	added := 0
	for i, raw := range entries {
		if !fresh[i] {
			continue
		}
		added++
		if err := sc.c.Add(raw, emit); err != nil {
			return api.SourceAppendReply{}, false, nil // not a continuation: map it all again
		}
	}
	if added == 0 {
		s.keepCont(ss.stored, sc)
		return rep, true, nil
	}
	if err := sc.c.End(emit); err != nil {
		return api.SourceAppendReply{}, false, nil
	}
	s.m.sources.WithLabelValues("continued").Inc()
	sink := &agentlog.AppendSink{Ctx: ctx, Log: s.sinkLog(ss), Batch: sourceBatch, MaxBytes: int(s.nc.MaxPayload()),
		Finished: func(_ agentlog.Plan, last uint64, lastID string, added int) {
			rep.LastSeq, rep.Appended, sc.tail, sc.tailID = last, added, last, lastID
		}}
	if err := s.sinkEvents(sink, ss.wire, events); err != nil {
		return api.SourceAppendReply{}, true, err
	}
	for i := range ids {
		if fresh[i] {
			sc.t.add(ids[i])
		}
	}
	s.keepCont(ss.stored, sc)
	return rep, true, nil
}

// keepCont keeps a transcript's mapping state for its next append.
func (s *Service) keepCont(id string, sc *sourceCont) {
	if sc.c != nil && s.cfg.SourceStates > 0 && len(sc.t.ids) <= maxStateEntries {
		s.conts.Add(id, sc)
	}
}

// sinkEvents gives a session's events to sink.
func (s *Service) sinkEvents(sink *agentlog.AppendSink, id string, events []schema.Envelope) error {
	if err := sink.Session(agentlog.Plan{ID: id, FirstSeq: 1}); err != nil {
		return err
	}
	for _, e := range events {
		if err := sink.Event(e); err != nil {
			return sourceErr(err, id)
		}
	}
	return sourceErr(sink.Done(), id)
}

// sourceErr is a conflict when the stored session is not a prefix of what
// the entries map to.
func sourceErr(err error, id string) error {
	if de := (*agentlog.DivergedError)(nil); errors.As(err, &de) && de.Session == id {
		return schema.Errorf(schema.CodeConflict, "%v", err)
	}
	return err
}

// remapSource reads the transcript's stored entries, maps them and the new
// ones as import maps the file, and appends what is new of the session
// they give; it keeps the session's mapping state for the next append.
func (s *Service) remapSource(ctx context.Context, ss sourceSess, f agentlog.Format, k api.SourceKey, entries [][]byte) (api.SourceAppendReply, error) {
	select {
	case s.remaps <- struct{}{}:
		defer func() { <-s.remaps }()
	case <-ctx.Done():
		return api.SourceAppendReply{}, schema.Errorf(schema.CodeNotCommitted, "waiting to map the transcript: %v", ctx.Err())
	}
	// The stored lines go to the file that is mapped as they are read,
	// a page of events at a time: the append holds their identities, not
	// the session.
	sp, err := newSpool(k)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	defer sp.remove()
	rep := api.SourceAppendReply{SessionID: ss.asked}
	sc := &sourceCont{t: newTranscript(f), caller: ss.sc.caller}
	var gone bool
	last, err := agentlog.EachSourceLine(f.Name(), s.storedEvents(ctx, ss.sc, ss.asked, &gone), func(l json.RawMessage) error {
		sc.t.add(sc.t.id(l))
		return sp.add(l)
	})
	switch {
	case gone:
		// No session (or none any more): no stored lines.
		if err := sp.reset(); err != nil {
			return api.SourceAppendReply{}, err
		}
		sc.t = newTranscript(f)
	case err != nil:
		return api.SourceAppendReply{}, err
	default:
		rep.LastSeq = last
	}
	ids := make([]string, len(entries))
	for i, c := range entries {
		ids[i] = sc.t.id(c)
	}
	added := 0
	for i, fresh := range sc.t.fresh(ids) {
		if fresh {
			sc.t.add(ids[i])
			if err := sp.add(entries[i]); err != nil {
				return api.SourceAppendReply{}, err
			}
			added++
		}
	}
	if added == 0 {
		return rep, nil
	}
	s.m.sources.WithLabelValues("remapped").Inc()
	sink := &agentlog.AppendSink{Ctx: ctx, Log: s.sinkLog(ss), Batch: sourceBatch, MaxBytes: int(s.nc.MaxPayload()),
		Finished: func(p agentlog.Plan, last uint64, lastID string, added int) {
			if p.ID == ss.wire {
				rep.LastSeq, rep.Appended = last, added
				sc.tail, sc.tailID = last, lastID
			}
		}}
	if err := sp.mapped(f, agentlog.Options{Continue: func(c *agentlog.Continuation) { sc.c = c }}, sink); err != nil {
		return api.SourceAppendReply{}, sourceErr(err, ss.wire)
	}
	s.keepCont(ss.stored, sc)
	return rep, nil
}

// sinkLog is agentlog.Log for a source append's sink: it appends and
// reads through pkg/client as the request's caller, the tail too
// (clientlog). The sink names the session by the id the mapping gives it
// (ss.wire); the events it reads carry that id, as the mapped ones do.
func (s *Service) sinkLog(ss sourceSess) clientlog.Log {
	return clientlog.Log{Client: s.clientOf(ss.sc), Caller: ss.sc.caller,
		Wire: ss.wire, Asked: ss.asked, Stored: ss.stored, Err: fromClient}
}

// spool is the file a transcript is mapped from, as import maps the file
// the key names: its lines are written to it as they are read.
type spool struct {
	dir, path string
	f         *os.File
	w         *bufio.Writer
}

func newSpool(k api.SourceKey) (*spool, error) {
	dir, err := os.MkdirTemp("", "sessionlog-source-")
	if err != nil {
		return nil, err
	}
	sp := &spool{dir: dir, path: filepath.Join(dir, k.SessionKey+".jsonl")}
	if k.Subpath != "" {
		sp.path = filepath.Join(dir, k.SessionKey, filepath.FromSlash(k.Subpath)+".jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(sp.path), 0o700); err != nil {
		sp.remove()
		return nil, err
	}
	if sp.f, err = os.OpenFile(sp.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
		sp.remove()
		return nil, err
	}
	sp.w = bufio.NewWriterSize(sp.f, 64<<10)
	return sp, nil
}

// add writes the next line.
func (sp *spool) add(l []byte) error {
	if _, err := sp.w.Write(l); err != nil {
		return err
	}
	return sp.w.WriteByte('\n')
}

// reset empties the file.
func (sp *spool) reset() error {
	sp.w.Reset(sp.f)
	if err := sp.f.Truncate(0); err != nil {
		return err
	}
	_, err := sp.f.Seek(0, io.SeekStart)
	return err
}

// mapped maps the lines written as import maps the file.
func (sp *spool) mapped(f agentlog.Format, opt agentlog.Options, sink agentlog.Sink) error {
	if err := sp.w.Flush(); err != nil {
		return err
	}
	_, err := agentlog.ReadFile(f, sp.path, opt, sink)
	return err
}

func (sp *spool) remove() {
	if sp.f != nil {
		sp.f.Close()
	}
	os.RemoveAll(sp.dir)
}

func (s *Service) handleSourceAppend(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "append", s.SourceAppendAs)
}
