package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

const (
	maxPendingTransient = 256
	// watchPageEvents and watchFetchWait: one fetch of durable events
	// (bounded in bytes by WatchLimits.PageBytes too).
	watchPageEvents = 1000
	watchFetchWait  = 20 * time.Second
	// CodeSlowConsumer ends a watch whose client fell behind: the SSE
	// "error" event that says so carries resumeAfter, the last durable
	// seq the client was sent, and reconnecting with it (Last-Event-ID)
	// misses nothing and doubles nothing.
	CodeSlowConsumer = "slow_consumer"
)

// WatchLimits bound the memory of watch streams. A watch never holds more
// than QueueBytes of transient events for its client (past it the watch
// ends with an SSE error event, CodeSlowConsumer), all watches together
// no more than TotalBytes, and durable events are read from the log a
// page (PageBytes) at a time, only as fast as the client takes them: a
// client slow on durable events is paced, not buffered. One watch holds
// at most QueueBytes + PageBytes + two events. Their defaults are
// DefaultWatchLimits().
type WatchLimits struct {
	// QueueBytes: transient events queued for one watch's client.
	QueueBytes int
	// TotalBytes: transient events queued for all watches.
	TotalBytes int
	// PageBytes: durable events pulled from the log ahead of the client
	// (at least the server's max payload, or a larger event could never
	// be pulled).
	PageBytes int
	// MaxTransientBytes: larger transient events are dropped (and counted
	// in sessionlog_projector_transient_dropped_total{reason="too_large"}).
	MaxTransientBytes int
	// WriteTimeout bounds one write to a client: a client that reads
	// nothing for this long is disconnected.
	WriteTimeout time.Duration
}

// DefaultWatchLimits are the watch limits a field left zero takes.
func DefaultWatchLimits() WatchLimits {
	return WatchLimits{
		QueueBytes:        2 << 20,
		TotalBytes:        256 << 20,
		PageBytes:         1 << 20,
		MaxTransientBytes: 64 << 10,
		WriteTimeout:      30 * time.Second,
	}
}

// WithDefaults is l with DefaultWatchLimits' value in each field left
// zero (<= 0).
func (l WatchLimits) WithDefaults() WatchLimits {
	d := DefaultWatchLimits()
	if l.QueueBytes <= 0 {
		l.QueueBytes = d.QueueBytes
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = d.TotalBytes
	}
	if l.PageBytes <= 0 {
		l.PageBytes = d.PageBytes
	}
	if l.MaxTransientBytes <= 0 {
		l.MaxTransientBytes = d.MaxTransientBytes
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	return l
}

// watchHub is what the watches of one projector share: their limits, the
// bytes they hold together and their metrics.
type watchHub struct {
	lim     WatchLimits
	queued  atomic.Int64
	dropped *prometheus.CounterVec
	ended   *prometheus.CounterVec
	// commits counts the batches of views that landed (Server.Landed):
	// a session's owner and grants are read again only after one did.
	commits atomic.Uint64

	mu   sync.Mutex
	live map[string]*liveSub // by session id
}

// liveSub is the one subscription to a session's transient events that
// all its watches share: each event is received, checked and decoded
// once, and its bytes are shared by the queues it goes to.
type liveSub struct {
	sub    atomic.Pointer[LiveSub]
	mu     sync.Mutex
	queues map[*watchQueue]struct{}
	// summary reads the session's summary from the views; writers is
	// who may write to the session as last read, used only on the
	// subscription's goroutine (deliver).
	summary func() (*store.Summary, error)
	// hmu guards writers and held: deliver and the hold's timer.
	hmu     sync.Mutex
	writers *liveWriters
	// held are live events refused until the views catch up (a session
	// or a grant not folded yet), in the order they came; a timer looks
	// at them again every liveHoldTick while any is held.
	held      []heldLive
	heldBytes int
	timer     *time.Timer
	closed    bool
}

// heldLive is a live event held, with when it came and why it was
// refused.
type heldLive struct {
	ev     WatchEvent
	msg    logstore.LiveMsg
	at     time.Time
	reason string
}

// A live event the views do not let through yet (its session not folded,
// or its publisher's grant not folded: the projector lags the log) is
// held and looked at again every liveHoldTick, as the views catch up, for
// at most liveHoldFor; at most liveHoldMax events and one watch's
// QueueBytes are held per session (past them, the oldest event of the
// publisher holding the most bytes is dropped). Events of a publisher with one held wait
// behind it, so each publisher's events keep their order.
const (
	liveHoldFor  = 2 * time.Second
	liveHoldTick = 100 * time.Millisecond
	liveHoldMax  = 256
)

// liveWriters is a session's owner and grants as the views held them
// when the hub had counted commits batches.
type liveWriters struct {
	meta    schema.SessionCreated // Owner and Grants only
	folded  bool                  // the views hold the session
	lastSeq uint64                // the last seq the views hold
	commits uint64
}

// subscribe adds q to the session's transient events; the returned func
// takes it off (and unsubscribes after the last watch). summary reads the
// session's summary, for its owner and grants.
func (h *watchHub) subscribe(st Log, id string, q *watchQueue, summary func() (*store.Summary, error)) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ls := h.live[id]
	if ls == nil {
		ls = &liveSub{queues: map[*watchQueue]struct{}{}, summary: summary}
		// The handler is quick, so nats.go's list stays short; the limit is
		// a safety net for a starved handler (its default is 64 MiB).
		sub, err := st.Live(id, 4*h.lim.QueueBytes, func(m logstore.LiveMsg) { h.deliver(ls, m) })
		if err != nil {
			return nil, err
		}
		ls.sub.Store(&sub)
		h.live[id] = ls
	}
	ls.mu.Lock()
	ls.queues[q] = struct{}{}
	ls.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		ls.mu.Lock()
		delete(ls.queues, q)
		empty := len(ls.queues) == 0
		ls.mu.Unlock()
		if empty && h.live[id] == ls {
			delete(h.live, id)
			_ = (*ls.sub.Load()).Close()
			ls.hmu.Lock()
			ls.closed, ls.held, ls.heldBytes = true, nil, 0
			if ls.timer != nil {
				ls.timer.Stop()
			}
			ls.hmu.Unlock()
		}
	}, nil
}

// deliver checks one transient event and queues it for every watch of its
// session. Events nats.go dropped for a starved handler end those watches
// as slow: they missed events.
func (h *watchHub) deliver(ls *liveSub, m logstore.LiveMsg) {
	dropped := false
	if sub := ls.sub.Load(); sub != nil && (*sub).Dropped() > 0 {
		dropped = true
	}
	var ev WatchEvent
	if !dropped {
		if len(m.Data) > h.lim.MaxTransientBytes {
			h.dropped.WithLabelValues("too_large").Inc()
			return
		}
		var ok bool
		if ev, ok = transient(m); !ok {
			h.dropped.WithLabelValues("invalid").Inc()
			return
		}
		ls.hmu.Lock()
		defer ls.hmu.Unlock()
		reason, final := h.refuse(ls, m, *ev.AfterSeq)
		if first, ok := ls.heldOf(m.Caller); ok {
			// Behind a held event of its publisher, whatever its own answer.
			reason, final = first, false
		}
		switch {
		case reason == "":
		case final:
			h.dropped.WithLabelValues(reason).Inc()
			return
		default:
			h.hold(ls, heldLive{ev: ev, msg: m, at: time.Now(), reason: reason})
			return
		}
	}
	ls.push(ev, dropped)
}

// push queues ev for every watch of the session, or, dropped, ends each as
// having missed events.
func (ls *liveSub) push(ev WatchEvent, dropped bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for q := range ls.queues {
		if dropped {
			q.overflow()
		} else {
			q.push(ev)
		}
	}
}

// heldOf returns why the first held event of caller was refused, if one
// is held. ls.hmu is held.
func (ls *liveSub) heldOf(caller api.Caller) (string, bool) {
	for _, e := range ls.held {
		if e.msg.Caller == caller {
			return e.reason, true
		}
	}
	return "", false
}

// hold keeps e until the views let it through or it is liveHoldFor old,
// dropping the oldest held event past liveHoldMax. ls.hmu is held.
func (h *watchHub) hold(ls *liveSub, e heldLive) {
	if ls.closed {
		return
	}
	ls.held = append(ls.held, e)
	ls.heldBytes += len(e.ev.Event)
	for len(ls.held) > liveHoldMax || ls.heldBytes > h.lim.QueueBytes {
		h.evict(ls)
	}
	if ls.timer == nil {
		ls.timer = time.AfterFunc(liveHoldTick, func() { h.release(ls) })
	} else if len(ls.held) == 1 {
		ls.timer.Reset(liveHoldTick)
	}
}

// evict drops the oldest held event of the publisher that holds the most
// bytes, so that one publisher's flood drops its own events, not those of
// the others. ls.hmu is held.
func (h *watchHub) evict(ls *liveSub) {
	bytes := map[api.Caller]int{}
	var top api.Caller
	for _, e := range ls.held {
		bytes[e.msg.Caller] += len(e.ev.Event)
		if bytes[e.msg.Caller] > bytes[top] {
			top = e.msg.Caller
		}
	}
	i := slices.IndexFunc(ls.held, func(e heldLive) bool { return e.msg.Caller == top })
	h.dropped.WithLabelValues(ls.held[i].reason).Inc()
	ls.heldBytes -= len(ls.held[i].ev.Event)
	ls.held = slices.Delete(ls.held, i, i+1)
}

// release looks at the held events again, in order: one the views now
// let through is queued, one refused for good or held for liveHoldFor is
// dropped and counted with its reason, the rest (and every later event of
// a publisher with one left) wait for the next tick.
func (h *watchHub) release(ls *liveSub) {
	ls.hmu.Lock()
	defer ls.hmu.Unlock()
	now := time.Now()
	keep := ls.held[:0]
	ls.heldBytes = 0
	waiting := map[api.Caller]string{} // publishers with an event still held, and why
	for _, e := range ls.held {
		reason, behind := waiting[e.msg.Caller]
		final := false
		if !behind {
			reason, final = h.refuse(ls, e.msg, *e.ev.AfterSeq)
		}
		switch {
		case reason == "":
			ls.push(e.ev, false)
		case final || now.Sub(e.at) >= liveHoldFor:
			h.dropped.WithLabelValues(reason).Inc()
		default:
			waiting[e.msg.Caller] = reason
			e.reason = reason
			keep = append(keep, e)
			ls.heldBytes += len(e.ev.Event)
		}
	}
	clear(ls.held[len(keep):])
	ls.held = keep
	if len(ls.held) > 0 && !ls.closed {
		ls.timer.Reset(liveHoldTick)
	}
}

// refuse says why a live event is not shown ("" if it is), and whether
// that is final: a live event is shown only if its publisher, as the
// server names it, may write to the session (api.Authorize: its owner, an
// agent its grants name, or an operator). The owner and grants are the
// views': read when the first event of an agent comes, and again once
// more batches have landed (grants only grow, so an answer of yes
// stays). A refusal is not final while the views do not hold the session
// or have not folded the durable seq the event says it follows
// (afterSeq): the projector lags, and a grant may be on its way (the
// event is held, liveHoldFor at most). ls.hmu is held.
func (h *watchHub) refuse(ls *liveSub, m logstore.LiveMsg, afterSeq uint64) (reason string, final bool) {
	if m.Caller.Operator() {
		return "", true
	}
	w := ls.writers
	if w != nil && w.folded && api.Authorize(m.Caller, m.SessionID, &w.meta) == nil {
		return "", true
	}
	if n := h.commits.Load(); w == nil || w.commits != n {
		w = &liveWriters{commits: n}
		if sum, err := ls.summary(); err == nil && sum != nil {
			w.meta.Owner, w.meta.Grants, w.folded, w.lastSeq = sum.Owner, sum.Grants, true, sum.LastSeq
		}
		ls.writers = w
	}
	switch {
	case !w.folded:
		return "not_folded", false
	case api.Authorize(m.Caller, m.SessionID, &w.meta) == nil:
		return "", true
	}
	return "forbidden", w.lastSeq >= afterSeq
}

func newWatchHub(lim WatchLimits, r prometheus.Registerer) (*watchHub, error) {
	lim = lim.WithDefaults()
	h := &watchHub{
		lim:  lim,
		live: map[string]*liveSub{},
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessionlog_projector_transient_dropped_total",
			Help: "Transient events not passed to a watch, by reason (forbidden: its publisher may not write to the session; not_folded: the views do not hold the session yet; too_large: over the size limit; invalid: not a JSON object with afterSeq)."}, []string{"reason"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessionlog_projector_watches_ended_total",
			Help: "Watch streams the projector ended, by code (slow_consumer: the client fell behind its byte budget)."}, []string{"code"}),
	}
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionlog_projector_watch_queued_bytes",
		Help: "Transient event bytes queued for watch clients."}, func() float64 { return float64(h.queued.Load()) })
	for _, c := range []prometheus.Collector{h.dropped, h.ended, queued} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("projector: metrics: %w", err)
		}
	}
	return h, nil
}

// watchQueue holds one watch's transient events between the NATS
// subscription and the client, within its byte budget and the hub's.
// bytes counts every event taken from NATS and not yet sent or discarded,
// those the watch loop holds included.
type watchQueue struct {
	hub   *watchHub
	limit int64
	ready chan struct{}

	mu    sync.Mutex
	evs   []WatchEvent
	bytes int64
	over  bool
}

func newWatchQueue(hub *watchHub) *watchQueue {
	return &watchQueue{hub: hub, limit: int64(hub.lim.QueueBytes), ready: make(chan struct{}, 1)}
}

// push queues ev; past either budget the queue overflows: it drops what it
// holds and stays overflowed.
func (q *watchQueue) push(ev WatchEvent) {
	n := int64(len(ev.Event))
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.over {
		return
	}
	if q.bytes+n > q.limit || q.hub.queued.Add(n) > int64(q.hub.lim.TotalBytes) {
		if q.bytes+n <= q.limit {
			q.hub.queued.Add(-n)
		}
		q.over = true
		for _, ev := range q.evs {
			q.bytes -= int64(len(ev.Event))
			q.hub.queued.Add(-int64(len(ev.Event)))
		}
		q.evs = nil
	} else {
		q.evs = append(q.evs, ev)
		q.bytes += n
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take hands the queued events to the watch loop, which releases each
// once sent or discarded.
func (q *watchQueue) take() ([]WatchEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	return evs, q.over
}

// overflow marks the queue overflowed (nats.go dropped an event for it).
func (q *watchQueue) overflow() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.over {
		q.over = true
		for _, ev := range q.evs {
			q.bytes -= int64(len(ev.Event))
			q.hub.queued.Add(-int64(len(ev.Event)))
		}
		q.evs = nil
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *watchQueue) overflowed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.over
}

func (q *watchQueue) release(ev WatchEvent) {
	n := int64(len(ev.Event))
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
	q.hub.queued.Add(-n)
}

// close gives back every byte the watch still holds (those the loop took
// included): the loop releases nothing after it.
func (q *watchQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.over = true
	q.evs = nil
	q.hub.queued.Add(-q.bytes)
	q.bytes = 0
}

// WatchEvent is the data of one SSE event of GET /v1/sessions/{id}/watch.
// Durable events carry seq; transient ones afterSeq (the durable seq they
// follow). The SSE id is seq for a durable event and afterSeq for a
// transient one: a reconnect with Last-Event-ID resumes right after the
// last durable event the client saw, so nothing is missed or doubled.
type WatchEvent struct {
	Transient bool            `json:"transient"`
	Seq       uint64          `json:"seq,omitempty"`
	StreamSeq uint64          `json:"streamSeq,omitempty"`
	AfterSeq  *uint64         `json:"afterSeq,omitempty"`
	Event     json.RawMessage `json:"event"`
}

// WatchEnd is the data of the SSE "error" event that ends a watch the
// projector closes (CodeSlowConsumer). Its SSE id, like resumeAfter, is the
// last durable seq sent: an EventSource (and the dashboard's fetch reader)
// reconnects with it by itself.
type WatchEnd struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	ResumeAfter uint64 `json:"resumeAfter"`
}

// handleWatch streams the session's durable events after `after` (or the
// Last-Event-ID header, which a reconnecting EventSource, or the
// dashboard's fetch reader, sends), then the
// live ones: durable events by tailing the stream with an ordered
// consumer, a page at a time as the client takes them, transient ones
// from core NATS sessions.live.<id> within the watch's byte budget.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	raw := r.URL.Query().Get("after")
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		raw = h
	}
	after, err := parseSeq(raw)
	if err != nil {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "after / Last-Event-ID "+err.Error())
		return
	}
	ctx := r.Context()
	fs, ok := s.startFollow(w, r, id, after)
	if !ok {
		return
	}
	hub := s.watch
	lim := hub.lim

	// Subscribe to transient events before reading the log, so none sent
	// after the durable event they follow is lost in between. What the
	// client has not read of them stays within the queue's budget.
	q := newWatchQueue(hub)
	defer q.close()
	leave, err := hub.subscribe(s.ls, id, q, func() (sum *store.Summary, err error) {
		err = s.view(func(rd reader) error {
			sum, err = rd.summary(id)
			return err
		})
		return sum, err
	})
	if err != nil {
		s.internal(w, err)
		return
	}
	defer leave()

	durCh, stop, err := s.followDurable(ctx, id, fs.loc, fs.from)
	if err != nil {
		s.internal(w, err)
		return
	}
	defer stop()
	vouched := fs.vouched

	rc, done := s.openStream(w, "text/event-stream")
	defer done()
	write := func(format string, args ...any) error {
		rc.SetWriteDeadline(time.Now().Add(lim.WriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	n := namesOf(r)
	if write("retry: 2000\n: watching %s after %d\n\n", n.wire(id), after) != nil {
		return
	}
	// last: what the client has (the SSE id). judged: where the judge
	// stands, which starts at the last event the projector folded up to
	// after (startAt) and may be behind it: the events between are
	// judged in order, then skipped, as /events skips them.
	last, judged := after, fs.last
	// pending: transient events that follow a durable event not sent yet,
	// oldest first; their bytes stay counted in q until sent or dropped.
	var pending []WatchEvent
	var pendingBytes int
	send := func(id uint64, kind string, ev WatchEvent) error {
		b, _ := json.Marshal(ev)
		return write("id: %d\nevent: %s\ndata: %s\n\n", id, kind, b)
	}
	// slow ends the watch: whatever the client has not read of the
	// transient events is dropped, the durable ones it will get again.
	slow := func() {
		hub.ended.WithLabelValues(CodeSlowConsumer).Inc()
		var end WatchEnd
		end.Error.Code = CodeSlowConsumer
		end.Error.Message = fmt.Sprintf("the client fell behind by more than %d bytes of live events; reconnect after seq %d", lim.QueueBytes, last)
		end.ResumeAfter = last
		b, _ := json.Marshal(end)
		_ = write("id: %d\nevent: error\ndata: %s\n\n", last, b)
	}
	// stopped ends the watch at a stored message that is not the
	// session's next event: unreadable (or a gap) is a definite answer,
	// nothing of that message or after it is sent.
	stopped := func(v verdict, streamSeq uint64, why string) {
		code := schema.CodeUnreadable
		if v == storedGap {
			code, why = store.StatusGap, fmt.Sprintf("the session's events after seq %d are missing from the log", last)
		}
		hub.ended.WithLabelValues(string(code)).Inc()
		var end WatchEnd
		end.Error.Code = string(code)
		end.Error.Message = n.text(fmt.Sprintf("stored message at stream seq %d: %s", streamSeq, why))
		end.ResumeAfter = last
		b, _ := json.Marshal(end)
		_ = write("id: %d\nevent: error\ndata: %s\n\n", last, b)
	}
	// onTransient sends, holds or discards one transient event.
	onTransient := func(ev WatchEvent) error {
		switch a := *ev.AfterSeq; {
		case a == last:
			err := send(a, "transient", ev)
			q.release(ev)
			return err
		case a > last:
			pending = append(pending, ev)
			pendingBytes += len(ev.Event)
			// Held events that name a seq far ahead may never be sent:
			// keep the newest within half the budget.
			for len(pending) > maxPendingTransient || pendingBytes > lim.QueueBytes/2 {
				pendingBytes -= len(pending[0].Event)
				q.release(pending[0])
				pending = pending[1:]
			}
		default:
			// It belongs before durable events the client has already;
			// sending it would move the SSE id backwards.
			q.release(ev)
		}
		return nil
	}
	ping := time.NewTicker(s.cfg.Heartbeat)
	defer ping.Stop()
	for {
		// An overflow wins over everything else that is ready.
		if q.overflowed() {
			slow()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if write(": ping\n\n") != nil {
				return
			}
		case <-q.ready:
			evs, over := q.take()
			if over {
				for _, ev := range evs {
					q.release(ev)
				}
				continue
			}
			for _, ev := range evs {
				if onTransient(ev) != nil {
					return
				}
			}
		case lm, ok := <-durCh:
			if !ok {
				return
			}
			seq, v, why := judgeStored(id, judged, vouched, lm)
			switch {
			case v == storedCopy || (v == storedNext && seq == 0):
				continue
			case v == storedBad || v == storedGap:
				stopped(v, lm.StreamSeq, why)
				return
			}
			judged = seq
			if seq <= last {
				continue // the client has it
			}
			if send(seq, "durable", WatchEvent{Seq: seq, StreamSeq: lm.StreamSeq, Event: rawEvent(lm)}) != nil {
				return
			}
			last = seq
			// Transient events that were waiting for this seq.
			held := pending
			pending, pendingBytes = nil, 0
			for _, ev := range held {
				if onTransient(ev) != nil {
					return
				}
			}
		}
	}
}

// followStart is where a follow of a session's log begins (startFollow).
type followStart struct {
	loc logstore.Location
	// tailStreamSeq is the stream seq of the session's last message when
	// the request came.
	tailStreamSeq uint64
	// from is the stream seq to read after, last the seq of the event
	// there (0: from the start).
	from, last uint64
	// vouched: messages up to this stream seq were folded by the
	// projector; later ones are judged as /events judges them
	// (judgeStored), so a message that is not the session's next event
	// ends the follow instead of reaching the client.
	vouched uint64
}

// startFollow checks a follow of session id after seq after and finds
// where it starts; on a problem it has answered the request and returns
// false.
func (s *Server) startFollow(w http.ResponseWriter, r *http.Request, id string, after uint64) (followStart, bool) {
	var fs followStart
	// A last message that is unreadable (a sealed body that does not
	// open, a body that is not an event; ue) is where the tail is: the
	// follow starts as any and ends at that message, as at an unreadable
	// message elsewhere. Its seq is the one it claims (0: none, and after
	// is not checked against it).
	tail, ue, err := s.ls.TailPosition(r.Context(), id)
	if err != nil {
		s.readFailed(w, err)
		return fs, false
	}
	if !tail.Exists() {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return fs, false
	}
	// An after beyond the log would wait for events that may never come,
	// and the client's position would run ahead of the log: refuse it.
	if after > tail.Seq && (ue == nil || ue.GotSeq > 0) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, fmt.Sprintf("after %d is beyond the session's last seq %d", after, tail.Seq))
		return fs, false
	}
	if _, ok := w.(http.Flusher); !ok {
		s.internal(w, errors.New("response writer cannot flush"))
		return fs, false
	}
	if fs.loc, err = s.ls.Locate(id); err != nil {
		s.internal(w, err)
		return fs, false
	}
	fs.tailStreamSeq = tail.StreamSeq
	if err := s.view(func(rd reader) error {
		if fs.from, fs.last, err = rd.startAt(id, after); err != nil {
			return err
		}
		sum, err := rd.summary(id)
		if sum != nil {
			fs.vouched = sum.LastStreamSeq
		}
		return err
	}); err != nil {
		s.internal(w, err)
		return fs, false
	}
	return fs, true
}

// followDurable reads the session's durable messages after stream seq
// from, live, for a handler that writes them to its client: one consumer
// per request, with a short inactive threshold and deleted by stop
// (logstore.Follow). Messages come a page at a time: one fetch of at most
// watchPageEvents events and WatchLimits.PageBytes (never less than the
// largest message the server takes), the next one only when the handler
// has taken this one from the unbuffered channel, so a slow client is
// paced, not buffered. A live tail waits in the fetch for what comes
// next. The channel closes when ctx ends or the log cannot be read.
func (s *Server) followDurable(ctx context.Context, id string, loc logstore.Location, from uint64) (<-chan *logstore.Msg, func(), error) {
	fol, err := s.ls.Follow(ctx, logstore.FollowSpec{
		Stream:            loc.Stream,
		Subject:           loc.Subject,
		StartAfter:        from,
		PageEvents:        watchPageEvents,
		PageBytes:         s.watch.lim.PageBytes,
		InactiveThreshold: 15 * time.Second,
	})
	if err != nil {
		return nil, nil, err
	}
	durCh := make(chan *logstore.Msg)
	go func() {
		defer close(durCh)
		for ctx.Err() == nil {
			page, err := fol.Fetch(watchFetchWait)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("projector: follow fetch", "session", id, "err", err)
				}
				return
			}
			n := 0
			for m := range page.Messages() {
				select {
				case durCh <- m:
					n++
				case <-ctx.Done():
					return
				}
			}
			if err := page.Err(); err != nil && n == 0 {
				// Not a hot loop on a fetch that fails at once.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
			}
		}
	}()
	return durCh, fol.Close, nil
}

// transient decodes a live message: a JSON object whose afterSeq names
// the durable seq it follows.
func transient(m logstore.LiveMsg) (WatchEvent, bool) {
	var probe struct {
		AfterSeq *uint64 `json:"afterSeq"`
	}
	if !json.Valid(m.Data) || json.Unmarshal(m.Data, &probe) != nil {
		return WatchEvent{}, false
	}
	a := probe.AfterSeq
	if a == nil {
		if n, err := strconv.ParseUint(m.Header.Get("SL-After-Seq"), 10, 64); err == nil {
			a = &n
		} else {
			return WatchEvent{}, false
		}
	}
	return WatchEvent{Transient: true, AfterSeq: a, Event: json.RawMessage(m.Data)}, true
}

// openStream answers 200 with a stream of content type ct that stays open
// (the watch, ACP replay): counted among the watchers until done, with
// headers that keep caches and proxies from holding it back.
func (s *Server) openStream(w http.ResponseWriter, ct string) (rc *http.ResponseController, done func()) {
	s.met.watchers.Inc()
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w), s.met.watchers.Dec
}
