package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
	"github.com/sessionlog/sessionlog/services/projector/web"
)

// Paging limits.
const (
	DefaultListLimit   = 50
	MaxListLimit       = 1000
	DefaultEventsLimit = 100
	MaxEventsLimit     = 1000
)

// routes builds the API and dashboard mux; with ops it serves /healthz,
// /readyz and (given a Gatherer) /metrics too.
func (s *Server) routes(ops bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions", s.handleList)
	mux.HandleFunc("GET /v1/sessions/{id}", s.handleSession)
	mux.HandleFunc("GET /v1/sessions/{id}/events", s.handleEvents)
	mux.HandleFunc("GET /v1/sessions/{id}/context", s.handleContext)
	mux.HandleFunc("GET /v1/sessions/{id}/watch", s.handleWatch)
	mux.HandleFunc("GET /v1/sessions/{id}/acp", s.handleACP)
	mux.HandleFunc("GET /v1/sessions/{id}/export", s.handleExport)
	mux.HandleFunc("GET /v1/sessions/{id}/tree", s.handleTree)
	mux.HandleFunc("GET /v1/search", s.handleSearch)
	mux.HandleFunc("GET /v1/overview", s.handleOverview)
	s.actionRoutes(mux)
	mux.Handle("GET /{$}", web.Handler())
	mux.Handle("GET /assets/", web.Assets())
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no such path")
	})
	if !ops {
		return s.auth(s.tenantScope(s.refuseErased(mux)))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.v.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if s.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	return s.auth(s.tenantScope(s.refuseErased(mux)))
}

// APIHandler is the API and the dashboard without /healthz, /readyz and
// /metrics, for a server that serves those itself (sessionlog up).
func (s *Server) APIHandler() http.Handler { return s.api }

// auth requires the bearer token on everything but /healthz and /readyz,
// by the rule every sessionlog HTTP server shares (package httpauth).
func (s *Server) auth(next http.Handler) http.Handler {
	return httpauth.RequireTenants(s.cfg.HTTPToken, s.cfg.TenantTokens, next)
}

func apiError(w http.ResponseWriter, status int, code schema.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": string(code), "message": msg}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// ErrClosed: the store was closed (the projector stopped).
var ErrClosed = errors.New("projector: store closed")

// view runs fn on a consistent snapshot of the store.
func (s *Server) view(fn func(r reader) error) error {
	return s.v.View(func(snap store.Snapshot) error { return fn(reader{snap: snap}) })
}

// reader is the HTTP side's access to the views: one store snapshot, read
// and never written.
type reader struct {
	snap store.Snapshot
	// reads, if set, counts the summaries read (a list's page: what it
	// read, index entries and summaries, is sessionlog_projector_list_reads_total).
	reads *store.ListReads
}

// summary reads a session's summary (nil: none), counted in reads.
func (r reader) summary(id string) (*store.Summary, error) {
	if r.reads != nil {
		r.reads.Summaries++
	}
	return r.snap.Summary(id)
}

func (s *Server) internal(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrClosed) {
		apiError(w, http.StatusServiceUnavailable, schema.CodeInternal, "the projector is stopping")
		return
	}
	s.log.Error("projector: http", "err", err)
	apiError(w, http.StatusInternalServerError, schema.CodeInternal, "internal error")
}

// sessionID validates the {id} path value. The mux decodes %2F and the
// like before this check, so nothing but a valid id reaches the store.
func sessionID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !schema.ValidSessionID(id) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "session id must match ^[A-Za-z0-9_-]{1,128}$")
		return "", false
	}
	return id, true
}

func parseSeq(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, errors.New("must be a non-negative integer")
	}
	return n, nil
}

func parseLimit(w http.ResponseWriter, r *http.Request, def, max int) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d", max))
		return 0, false
	}
	return n, true
}

// Detail is GET /v1/sessions/{id}: the summary plus the derived children.
type Detail struct {
	store.Summary
	Children []string `json:"children"`
}

// Context is GET /v1/sessions/{id}/context.
type Context struct {
	SessionID string `json:"sessionId"`
	LastSeq   uint64 `json:"lastSeq"`
	// Compaction is the last ended compaction: the model sees its summary
	// in place of events 1..throughSeq.
	Compaction *store.CompactionSummary `json:"compaction,omitempty"`
	Entries    []store.ContextEntry     `json:"entries"`
}

// List is GET /v1/sessions.
type List struct {
	Sessions []store.Summary `json:"sessions"`
	// Next is the cursor for the following page (after=), empty at the end.
	Next string `json:"next,omitempty"`
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !store.ValidStatus(status) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, fmt.Sprintf("status must be one of %s", strings.Join(store.Statuses, ", ")))
		return
	}
	limit, ok := parseLimit(w, r, DefaultListLimit, MaxListLimit)
	if !ok {
		return
	}
	out, reads, err := s.list(httpauth.TenantOf(r.Context()), httpauth.AgentsOf(r.Context()), status, q.Get("after"), limit)
	s.met.listReads.WithLabelValues("index").Add(float64(reads.Entries))
	s.met.listReads.WithLabelValues("summary").Add(float64(reads.Summaries))
	if errors.Is(err, errBadCursor) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "after must be a cursor from next or a known session id")
		return
	}
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, out)
}

// list is a page of GET /v1/sessions for a tenant ("": the operator) and
// its agents (nil: the tenant's token), with the status asked ("": any),
// after the cursor after: the sessions they may see (Sees), not erased,
// most recently active first, named as the tenant's agents name them.
// errBadCursor: after is no cursor.
func (s *Server) list(tenant string, agents []string, status, after string, limit int) (List, store.ListReads, error) {
	n := names{tenant: tenant}
	var out List
	out.Sessions = []store.Summary{}
	var reads store.ListReads
	err := s.view(func(rd reader) error {
		rd.reads = &reads
		keep := visibleTo(tenant, agents, rd)
		var from *store.IndexPos
		if after != "" {
			// The cursor is "<activity ns>.<session id>"; a bare session id
			// continues after that session's current place.
			var ns uint64
			var id string
			var err error
			if t, sid, ok := strings.Cut(after, "."); ok {
				ns, err = strconv.ParseUint(t, 10, 64)
				if id = n.stored(sid); err != nil || !schema.ValidSessionID(id) {
					return errBadCursor
				}
			} else {
				after = n.stored(after)
				if !schema.ValidSessionID(after) || keep != nil && !keep(after) {
					return errBadCursor
				}
				sum, err := rd.summary(after)
				if err != nil {
					return err
				}
				if sum == nil {
					return errBadCursor
				}
				ns, id = store.TimeKey(sum.LastActivity), after
			}
			from = &store.IndexPos{NS: ns, ID: id}
		}
		var sums []store.Summary
		var more bool
		var walked store.ListReads
		var err error
		if agents != nil {
			sums, more, walked, err = rd.snap.AgentsList(tenant, agents, status, from, limit, func(id string, sum *store.Summary) bool {
				return !s.v.Erased(id) && Sees(tenant, agents, id, sum)
			})
		} else {
			sums, more, walked, err = rd.snap.List(tenant, status, from, limit, s.listedTo(tenant, agents, rd))
		}
		reads.Add(walked)
		if err != nil {
			return err
		}
		for i := range sums {
			n.summary(&sums[i])
		}
		out.Sessions = append(out.Sessions, sums...)
		if more && len(sums) > 0 {
			last := sums[len(sums)-1]
			out.Next = strconv.FormatUint(store.TimeKey(last.LastActivity), 10) + "." + last.SessionID
		}
		return nil
	})
	return out, reads, err
}

var errBadCursor = errors.New("bad cursor")

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var d *Detail
	err := s.view(func(rd reader) error {
		keep := s.listed(r, rd)
		sum, err := rd.summary(id)
		if err != nil || sum == nil {
			return err
		}
		n := namesOf(r)
		n.summary(sum)
		d = &Detail{Summary: *sum, Children: []string{}}
		return rd.snap.Children(id, func(c string) bool {
			if keep(c) {
				d.Children = append(d.Children, n.wire(c))
			}
			return true
		})
	})
	if err != nil {
		s.internal(w, err)
		return
	}
	if d == nil {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return
	}
	writeJSON(w, d)
}

// startAt returns a stream sequence to read the session from so that
// every event with seq > after follows it: the stream seq of event
// `after`, or of the nearest indexed event before it; and the seq of the
// event there (0 with it).
func (rd reader) startAt(id string, after uint64) (streamSeq, seq uint64, err error) {
	if after == 0 {
		return 0, 0, nil
	}
	seq, streamSeq, err = rd.snap.LastEvent(id, after)
	return streamSeq, seq, err
}

// Events is GET /v1/sessions/{id}/events.
//
// A session stopped unreadable or at a gap is served up to its last folded
// event and then ends: the page's last entry is a marker
// {"unreadable":true,"seq","streamSeq","code","message"} (seq: where
// folding stopped), Error says the same, More is false (a full page says
// More, and the marker comes on the next). A message the
// projector has not judged yet is served only if it is a valid event of the
// session with the next seq; one that is not ends the page the same way.
// Nothing of what follows a bad message is ever served.
type Events struct {
	SessionID string            `json:"sessionId"`
	Events    []json.RawMessage `json:"events"`
	// Next is the after= of the following page; More says there is one.
	Next  uint64       `json:"next"`
	More  bool         `json:"more"`
	Error *EventsError `json:"error,omitempty"`
}

// EventsError ends the events of a session that cannot be read further.
type EventsError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Seq       uint64 `json:"seq"`
	StreamSeq uint64 `json:"streamSeq"`
}

// verdict is what a reader makes of one stored message of a session.
type verdict int

const (
	storedNext verdict = iota // the session's next event (or one the projector folded)
	storedCopy                // a stored copy of a folded event: skip it
	storedBad                 // not a valid event of the session: it stops unreadable
	storedGap                 // a seq past the next: the projector decides (gap fill)
)

// judgeStored checks one stored message of session id that follows seq
// last. Messages up to stream seq vouched were folded by the projector
// (their seq is taken as it is, a repeat of one folded is a stored copy);
// any later one must be the session's next event (logstore.Judge).
// seq is the message's seq (0 when a folded message carries none).
func judgeStored(id string, last, vouched uint64, m *logstore.Msg) (seq uint64, v verdict, why string) {
	if m.StreamSeq <= vouched {
		n, ok := seqOf(m)
		if ok && n <= last {
			return n, storedCopy, ""
		}
		return n, storedNext, ""
	}
	// logstore.Judge decides, as for every reader: after seq last (whose
	// stream position, event id and hash this reader does not keep).
	j := logstore.Judge{SessionID: id}
	if last > 0 {
		j.Last = logstore.Tail{Seq: last, StreamSeq: max(vouched, 1)}
	}
	ev, jv, err := j.Next(m)
	var ue *logstore.UnreadableError
	switch {
	case jv == logstore.VerdictOK:
		return ev.Seq, storedNext, ""
	case errors.As(err, &ue) && ue.Kind == logstore.KindGap:
		return ev.Seq, storedGap, ""
	}
	return 0, storedBad, err.Error()
}

// seqOf reads a stored message's session seq (header first).
func seqOf(m *logstore.Msg) (uint64, bool) {
	if n, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64); err == nil && n > 0 {
		return n, true
	}
	var probe struct {
		Seq uint64 `json:"seq"`
	}
	if json.Unmarshal(m.Data, &probe) == nil && probe.Seq > 0 {
		return probe.Seq, true
	}
	return 0, false
}

// rawEvent is a stored body as JSON: stored bodies are JSON unless
// someone published garbage, which is then shown as unreadable.
func rawEvent(m *logstore.Msg) json.RawMessage {
	if json.Valid(m.Data) {
		return json.RawMessage(m.Data)
	}
	b, _ := json.Marshal(map[string]any{"unreadable": true, "streamSeq": m.StreamSeq, "body": string(m.Data)})
	return b
}

// eventsPage streams one page of /events: each event as it is read, then
// next, more and error, byte for byte what writeJSON wrote of the whole
// Events.
type eventsPage struct {
	st  *streamer
	ids names  // how the request names sessions (the events go as stored)
	out Events // all but the events
	n   int
	buf bytes.Buffer
}

// parts are the page as writeJSON writes it without events, cut inside
// the events' brackets.
func (p *eventsPage) parts() (head, tail []byte) {
	o := p.out
	o.Events = []json.RawMessage{}
	var b bytes.Buffer
	encodeJSON(&b, o)
	i := bytes.Index(b.Bytes(), []byte(`"events":[]`)) + len(`"events":[`)
	return b.Bytes()[:i], b.Bytes()[i+1:]
}

// add writes one event of the page.
func (p *eventsPage) add(ev json.RawMessage) error {
	p.buf.Reset()
	if p.n == 0 {
		head, _ := p.parts()
		p.buf.Write(head)
	} else {
		p.buf.WriteByte(',')
	}
	if err := encodeJSON(&p.buf, ev); err != nil {
		return err
	}
	p.n++
	_, err := p.st.Write(p.buf.Bytes())
	return err
}

// finish writes the end of the page.
func (p *eventsPage) finish() error {
	head, tail := p.parts()
	p.buf.Reset()
	if p.n == 0 {
		p.buf.Write(head)
	}
	p.buf.WriteByte(']')
	p.buf.Write(tail)
	p.buf.WriteByte('\n')
	if _, err := p.st.Write(p.buf.Bytes()); err != nil {
		return err
	}
	return p.st.end()
}

// end closes the page with the marker of the message that stops the
// session, or, on a full page, says the marker is on the next one.
func (p *eventsPage) end(e *EventsError, limit int) error {
	if p.n >= limit {
		p.out.More = true
		return nil
	}
	e.Message = p.ids.text(e.Message)
	p.out.Error, p.out.More = e, false
	b, _ := json.Marshal(map[string]any{"unreadable": true, "seq": e.Seq, "streamSeq": e.StreamSeq, "code": e.Code, "message": e.Message})
	return p.add(b)
}

// known reads the session's summary (nil: none) and, when the views do
// not have it, whether the log does.
func (s *Server) known(ctx context.Context, id string) (*store.Summary, bool, error) {
	var sum *store.Summary
	err := s.view(func(rd reader) error {
		var err error
		sum, err = rd.summary(id)
		return err
	})
	if err != nil || sum != nil {
		return sum, sum != nil, err
	}
	t, err := s.ls.Tail(ctx, id)
	if err != nil {
		return nil, false, err
	}
	return nil, t.Exists(), nil
}

// answerKnown is known for a handler: a read that failed (readFailed) or
// a session that does not exist (404 not_found) is answered, and ok is
// false.
func (s *Server) answerKnown(w http.ResponseWriter, r *http.Request, id string) (sum *store.Summary, ok bool) {
	sum, exists, err := s.known(r.Context(), id)
	if err != nil {
		s.readFailed(w, err)
		return nil, false
	}
	if !exists {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return nil, false
	}
	return sum, true
}

// readFailed answers a failed read of a session: unreadable (the log holds
// a message that is not an event of it) is the session's definite state,
// never a server error.
func (s *Server) readFailed(w http.ResponseWriter, err error) {
	if schema.CodeOf(err) == schema.CodeUnreadable {
		apiError(w, http.StatusConflict, schema.CodeUnreadable, err.Error())
		return
	}
	s.internal(w, err)
}

func stoppedStatus(st string) bool { return st == store.StatusUnreadable || st == store.StatusGap }

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	after, err := parseSeq(r.URL.Query().Get("after"))
	if err != nil {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "after "+err.Error())
		return
	}
	limit, ok := parseLimit(w, r, DefaultEventsLimit, MaxEventsLimit)
	if !ok {
		return
	}
	sum, ok := s.answerKnown(w, r, id)
	if !ok {
		return
	}
	n := namesOf(r)
	page := &eventsPage{st: s.stream(w, jsonHeader()), out: Events{SessionID: n.wire(id), Next: after}, ids: n}
	failed := func(err error) { page.st.fail(func() { s.readFailed(w, err) }) }
	if sum != nil && stoppedStatus(sum.Status) {
		if err := s.stoppedEvents(r.Context(), sum, limit, page); err != nil {
			failed(err)
			return
		}
		page.finish()
		return
	}
	var from, last uint64
	if err := s.view(func(rd reader) error {
		from, last, err = rd.startAt(id, after)
		return err
	}); err != nil {
		s.internal(w, err)
		return
	}
	// Messages up to vouched were folded by the projector; those after it
	// are checked here, each against the seq of the one before (last),
	// whether before the page or on it.
	var vouched uint64
	if sum != nil {
		vouched = sum.LastStreamSeq
	}
	_, err = s.ls.ReadSession(r.Context(), id, from, func(m *logstore.Msg) error {
		seq, v, why := judgeStored(id, last, vouched, m)
		switch v {
		case storedCopy:
			return nil
		case storedBad:
			if err := page.end(&EventsError{Code: string(schema.CodeUnreadable), Seq: last + 1, StreamSeq: m.StreamSeq, Message: why}, limit); err != nil {
				return err
			}
			return logstore.ErrStop
		case storedGap:
			return logstore.ErrStop // a gap, or what a gap fill finds: the projector decides
		}
		if seq != 0 {
			last = seq
		}
		if seq != 0 && seq <= after {
			return nil
		}
		if page.n == limit {
			page.out.More = true
			return logstore.ErrStop
		}
		if err := page.add(json.RawMessage(m.Data)); err != nil {
			return err
		}
		if seq != 0 {
			page.out.Next = seq
		}
		return nil
	})
	if err != nil {
		failed(err)
		return
	}
	page.finish()
}

// stoppedEvents pages through the folded events of a stopped session,
// each read by the stream seq its index entry holds, and ends with the
// marker of its problem.
func (s *Server) stoppedEvents(ctx context.Context, sum *store.Summary, limit int, page *eventsPage) error {
	var seqs []uint64
	more := false
	err := s.view(func(rd reader) (err error) {
		seqs, more, err = rd.snap.StreamSeqs(sum.SessionID, page.out.Next+1, sum.LastSeq, limit)
		return err
	})
	if err != nil {
		return err
	}
	loc, err := s.ls.Locate(sum.SessionID)
	if err != nil {
		return err
	}
	for _, ss := range seqs {
		m, err := s.ls.MsgAt(ctx, loc.Stream, ss)
		if err != nil {
			return err
		}
		if m == nil {
			return fmt.Errorf("projector: %s: stream seq %d is gone", sum.SessionID, ss)
		}
		seq, _ := seqOf(m)
		if err := page.add(json.RawMessage(m.Data)); err != nil {
			return err
		}
		page.out.Next = seq
	}
	if more {
		page.out.More = true
		return nil
	}
	e := &EventsError{Code: store.StatusGap, Message: "the session has a gap", Seq: sum.LastSeq + 1}
	if p := sum.Problem; p != nil {
		e.Code, e.Message, e.Seq, e.StreamSeq = p.Code, p.Message, p.Seq, p.StreamSeq
	}
	if sum.Status == store.StatusUnreadable {
		e.Code = string(schema.CodeUnreadable)
	}
	return page.end(e, limit)
}

// skipper says whether a seq is in one of the ranges rewinds abandoned
// (store.Snapshot.Abandoned); it is asked in seq order.
type skipper struct{ ranges []store.Rewound }

func (k *skipper) skip(seq uint64) bool {
	for len(k.ranges) > 0 && k.ranges[0].Before <= seq {
		k.ranges = k.ranges[1:]
	}
	return len(k.ranges) > 0 && seq > k.ranges[0].After
}

// errGone: the session's views went away while its answer was streamed
// (it was erased).
var errGone = errors.New("projector: the session's views are gone")

// contextPage reads the session's context entries from seq from up to
// seq last, at most about limit bytes of them, leaving out what k skips.
// next is where the following page starts, 0 when this is the last.
func (rd reader) contextPage(id string, from, last uint64, limit int, k *skipper) (entries []store.ContextEntry, next uint64, err error) {
	sum, err := rd.summary(id)
	if err != nil {
		return nil, 0, err
	}
	if sum == nil {
		return nil, 0, errGone
	}
	return rd.snap.ContextPage(id, from, last, limit, k.skip)
}

// contextHead is where a session's context starts, read in one view:
// its summary (nil: no session), its last compaction (nil: none) and the
// first seq after it, and the ranges of entries a rewind abandoned.
// Nothing is read past the summary of an unreadable session: its context
// is not served.
type contextHead struct {
	sum  *store.Summary
	comp *store.CompactionSummary
	from uint64
	skip skipper
}

func (rd reader) contextHead(id string) (contextHead, error) {
	h := contextHead{from: 1}
	sum, err := rd.summary(id)
	h.sum = sum
	if err != nil || sum == nil || sum.Status == store.StatusUnreadable {
		return h, err
	}
	if h.comp, err = rd.snap.Compaction(id); err != nil {
		return h, err
	} else if h.comp != nil {
		h.from = h.comp.ThroughSeq + 1
	}
	if sum.Rewinds > 0 {
		h.skip.ranges, err = rd.snap.Abandoned(id, h.from, sum.LastSeq)
	}
	return h, err
}

// ContextOf is the context /context serves of session id, read whole from
// snap a page of about pageBytes at a time: nil and no error for no
// session, unreadable for a session whose context is not served.
func ContextOf(snap store.Snapshot, id string, pageBytes int) (c *Context, unreadable bool, err error) {
	rd := reader{snap: snap}
	ch, err := rd.contextHead(id)
	if err != nil || ch.sum == nil {
		return nil, false, err
	}
	if ch.sum.Status == store.StatusUnreadable {
		return nil, true, nil
	}
	c = &Context{SessionID: id, LastSeq: ch.sum.LastSeq, Compaction: ch.comp, Entries: []store.ContextEntry{}}
	k := ch.skip
	for next := ch.from; next != 0; {
		var entries []store.ContextEntry
		if entries, next, err = rd.contextPage(id, next, ch.sum.LastSeq, pageBytes, &k); err != nil {
			return nil, false, err
		}
		c.Entries = append(c.Entries, entries...)
	}
	return c, false, nil
}

// handleContext streams the context a page of entries at a time, each
// read in a view of its own (a slow client holds no snapshot), up to the
// lastSeq of the summary it answers with: events folded meanwhile are
// not among its entries.
func (s *Server) handleContext(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var ch contextHead
	if err := s.view(func(rd reader) (err error) { ch, err = rd.contextHead(id); return err }); err != nil {
		s.internal(w, err)
		return
	}
	switch {
	case ch.sum == nil:
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return
	case ch.sum.Status == store.StatusUnreadable:
		// The model-visible transcript of a session that cannot be read
		// to its end is not served: an agent would continue from it.
		msg := "session " + id + " is unreadable"
		if p := ch.sum.Problem; p != nil {
			msg += fmt.Sprintf(" at seq %d (stream seq %d): %s", p.Seq, p.StreamSeq, p.Message)
		}
		apiError(w, http.StatusConflict, schema.CodeUnreadable, msg)
		return
	}
	head := &Context{SessionID: namesOf(r).wire(id), LastSeq: ch.sum.LastSeq, Compaction: ch.comp, Entries: []store.ContextEntry{}}
	from, k := ch.from, ch.skip
	// The head as writeJSON writes it, up to the entries' "[".
	var b bytes.Buffer
	encodeJSON(&b, head)
	st := s.stream(w, jsonHeader())
	st.Write(bytes.TrimSuffix(b.Bytes(), []byte("]}")))
	n := 0
	for next := from; next != 0; {
		var entries []store.ContextEntry
		err := s.view(func(rd reader) error {
			var err error
			entries, next, err = rd.contextPage(id, next, head.LastSeq, st.limit, &k)
			return err
		})
		if err != nil {
			st.fail(func() {
				if errors.Is(err, errGone) {
					apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
					return
				}
				s.internal(w, err)
			})
			return
		}
		for i := range entries {
			b.Reset()
			if n > 0 {
				b.WriteByte(',')
			}
			encodeJSON(&b, &entries[i])
			n++
			if _, err := st.Write(b.Bytes()); err != nil {
				return
			}
		}
	}
	st.Write([]byte("]}\n"))
	st.end()
}
