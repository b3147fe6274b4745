package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// maxPendingTransient bounds the transient events a watch holds while the
// durable event they follow has not been sent yet.
const maxPendingTransient = 256

// writeTimeout bounds one SSE write: a client that stops reading is
// dropped instead of holding a goroutine forever.
const writeTimeout = 30 * time.Second

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

// handleWatch streams the session's durable events after `after` (or the
// Last-Event-ID header, which a reconnecting EventSource sends), then the
// live ones: durable events by tailing the stream with an ordered
// consumer, transient ones from core NATS sessions.live.<id>.
func (s *Service) handleWatch(w http.ResponseWriter, r *http.Request) {
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
	tail, err := s.ls.Tail(ctx, id)
	if err != nil {
		s.internal(w, err)
		return
	}
	if !tail.Exists() {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return
	}
	// An after beyond the log would wait for events that may never come,
	// and its SSE id would run ahead of the log: refuse it.
	if after > tail.Seq {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, fmt.Sprintf("after %d is beyond the session's last seq %d", after, tail.Seq))
		return
	}
	if _, ok := w.(http.Flusher); !ok {
		s.internal(w, errors.New("response writer cannot flush"))
		return
	}
	loc, err := logstore.Locate(id)
	if err != nil {
		s.internal(w, err)
		return
	}
	live, _ := logstore.LiveSubject(id)

	// Subscribe to transient events before reading the log, so none sent
	// after the durable event they follow is lost in between.
	trCh := make(chan *nats.Msg, 1024)
	sub, err := s.nc.ChanSubscribe(live, trCh)
	if err != nil {
		s.internal(w, err)
		return
	}
	defer sub.Unsubscribe()

	var from uint64
	if err := s.view(func(rd reader) error {
		from, err = rd.startAfter(id, after)
		return err
	}); err != nil {
		s.internal(w, err)
		return
	}
	// One consumer per watch: a stream takes 1000 by default, and an
	// ordered consumer outlives Stop for its inactive threshold (5 minutes
	// in nats.go), so watchers that come and go would use them up and
	// every session read on the stream would fail. Short threshold, and
	// deleted when the watch ends.
	cons, err := s.js.OrderedConsumer(ctx, loc.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{loc.Subject},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from + 1,
		InactiveThreshold: 15 * time.Second,
	})
	if err != nil {
		s.internal(w, err)
		return
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(500))
	if err != nil {
		s.internal(w, err)
		return
	}
	defer func() {
		it.Stop()
		if ci := cons.CachedInfo(); ci != nil && ci.Name != "" {
			go func() {
				dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = s.js.DeleteConsumer(dctx, loc.Stream, ci.Name)
			}()
		}
	}()
	durCh := make(chan jetstream.Msg, 64)
	go func() {
		defer close(durCh)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			select {
			case durCh <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	s.met.watchers.Inc()
	defer s.met.watchers.Dec()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(format string, args ...any) error {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	if write("retry: 2000\n: watching %s after %d\n\n", id, after) != nil {
		return
	}
	last := after
	var pending []WatchEvent
	send := func(id uint64, kind string, ev WatchEvent) error {
		b, _ := json.Marshal(ev)
		return write("id: %d\nevent: %s\ndata: %s\n\n", id, kind, b)
	}
	ping := time.NewTicker(s.cfg.Heartbeat)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if write(": ping\n\n") != nil {
				return
			}
		case m, ok := <-durCh:
			if !ok {
				return
			}
			lm := &logstore.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
			md, err := m.Metadata()
			if err == nil {
				lm.StreamSeq = md.Sequence.Stream
			}
			seq, ok := seqOf(lm)
			if !ok || seq <= last {
				continue
			}
			if send(seq, "durable", WatchEvent{Seq: seq, StreamSeq: lm.StreamSeq, Event: rawEvent(lm)}) != nil {
				return
			}
			last = seq
			// Transient events that were waiting for this seq.
			keep := pending[:0]
			for _, ev := range pending {
				switch a := *ev.AfterSeq; {
				case a == last:
					if send(a, "transient", ev) != nil {
						return
					}
				case a > last:
					keep = append(keep, ev)
				}
			}
			pending = keep
		case m := <-trCh:
			ev, ok := transient(m)
			if !ok {
				continue
			}
			switch a := *ev.AfterSeq; {
			case a == last:
				if send(a, "transient", ev) != nil {
					return
				}
			case a > last:
				if len(pending) == maxPendingTransient {
					pending = pending[1:]
				}
				pending = append(pending, ev)
			}
			// a < last: it belongs before durable events the client has
			// already; sending it would move the SSE id backwards.
		}
	}
}

// transient decodes a live message: a JSON object whose afterSeq names
// the durable seq it follows.
func transient(m *nats.Msg) (WatchEvent, bool) {
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
