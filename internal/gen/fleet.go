package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Session generates the events of one session in order: a deterministic
// script of turns (two model calls around a tool call), a goal update
// every fifth turn and a compaction every tenth.
type Session struct {
	ID   string
	seq  uint64 // last assigned
	out  uint64 // last returned by Next
	turn int
	step int
	t0   time.Time
	// queue of events of the current script step
	queue []schema.Envelope
}

// NewSession starts a session whose event times start at t0.
func NewSession(id string, t0 time.Time) *Session { return &Session{ID: id, t0: t0} }

// Seq is the seq of the last generated event.
func (s *Session) Seq() uint64 { return s.out }

func (s *Session) env(typ string, data any) schema.Envelope {
	s.seq++
	return event(s.ID, s.seq, s.ID+"-"+strconv.FormatUint(s.seq, 10), s.t0.Add(time.Duration(s.seq)*time.Millisecond).UTC(), typ, data)
}

func (s *Session) inTurn(typ, turn string, data any) schema.Envelope {
	e := s.env(typ, data)
	e.TurnID = turn
	return e
}

// Next returns the session's next event.
func (s *Session) Next() schema.Envelope {
	if len(s.queue) == 0 {
		s.fill()
	}
	e := s.queue[0]
	s.queue = s.queue[1:]
	s.out = e.Seq
	return e
}

// fill queues the next script step. The queue holds envelopes whose seq
// was assigned in order, so Next returns them contiguously.
func (s *Session) fill() {
	if s.seq == 0 {
		s.queue = append(s.queue, s.env(schema.TypeSessionCreated, map[string]any{"title": "load " + s.ID, "agent": "loadgen"}))
		return
	}
	s.turn++
	t := "t" + strconv.Itoa(s.turn)
	call := "call_" + strconv.Itoa(s.turn)
	a1, a2 := "a1", "a2"
	q := []schema.Envelope{
		s.inTurn(schema.TypeTurnStarted, t, map[string]any{"input": "do task " + strconv.Itoa(s.turn)}),
		s.inTurn(schema.TypeMessageUser, t, map[string]any{"content": "please do task " + strconv.Itoa(s.turn)}),
	}
	e := s.inTurn(schema.TypeAttemptStarted, t, map[string]any{"model": "m1"})
	e.AttemptID = a1
	q = append(q, e)
	e = s.inTurn(schema.TypeMessageAssistant, t, map[string]any{"content": "I will call a tool for task " + strconv.Itoa(s.turn)})
	e.AttemptID = a1
	q = append(q, e)
	e = s.inTurn(schema.TypeToolRequested, t, map[string]any{"name": "read_file", "input": map[string]string{"path": "/src/file" + strconv.Itoa(s.turn%17) + ".go"}})
	e.ToolCallID = call
	q = append(q, e)
	e = s.inTurn(schema.TypeToolStarted, t, struct{}{})
	e.ToolCallID = call
	q = append(q, e)
	e = s.inTurn(schema.TypeToolResult, t, map[string]any{"status": "ok", "output": "package main // " + strconv.Itoa(s.turn)})
	e.ToolCallID = call
	q = append(q, e)
	e = s.inTurn(schema.TypeAttemptStarted, t, map[string]any{"model": "m1"})
	e.AttemptID = a2
	q = append(q, e)
	e = s.inTurn(schema.TypeMessageAssistant, t, map[string]any{"content": "task " + strconv.Itoa(s.turn) + " is done"})
	e.AttemptID = a2
	q = append(q, e)
	q = append(q, s.inTurn(schema.TypeTurnEnded, t, map[string]any{"reason": "completed"}))
	if s.turn%5 == 0 {
		q = append(q, s.env(schema.TypeGoalUpdated, map[string]any{"revision": s.turn / 5, "objective": "finish the tasks", "status": "active"}))
	}
	if s.turn%10 == 0 {
		id := "c" + strconv.Itoa(s.turn)
		through := s.seq
		q = append(q, s.env(schema.TypeCompactionStarted, map[string]any{"compactionId": id, "throughSeq": through}))
		q = append(q, s.env(schema.TypeCompactionEnded, map[string]any{"compactionId": id, "throughSeq": through, "summary": "summary of the first " + strconv.Itoa(s.turn) + " tasks"}))
	}
	s.queue = append(s.queue, q...)
}

// Publish stores one event straight in the stream, with no sequence check
// (tests use it to store what the writer would refuse), chained to the
// session's stored tail (logstore's PublishUnchecked).
func Publish(ctx context.Context, st *logstore.Store, e schema.Envelope) (uint64, error) {
	return st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) { yield(e) })
}

// Fleet is a set of sessions generated together.
type Fleet struct {
	Sessions []*Session
	rnd      *rand.Rand
}

// NewFleet makes n sessions named prefix-0 ... prefix-(n-1).
func NewFleet(prefix string, n int, seed uint64, t0 time.Time) *Fleet {
	f := &Fleet{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range n {
		f.Sessions = append(f.Sessions, NewSession(fmt.Sprintf("%s-%d", prefix, i), t0))
	}
	return f
}

// Next returns the next event of a randomly chosen session.
func (f *Fleet) Next() schema.Envelope {
	return f.Sessions[f.rnd.IntN(len(f.Sessions))].Next()
}

// Fill publishes total events of the fleet to the stream with no
// sequence check (logstore's PublishUnchecked: async plain publishes) and
// waits for every ack. It returns the stream sequence of the last one.
func (f *Fleet) Fill(ctx context.Context, st *logstore.Store, total int) (uint64, error) {
	return st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) {
		for range total {
			if !yield(f.Next()) {
				return
			}
		}
	})
}

// LargeSession writes session id with a session/created event and n user
// messages of size bytes each (seqs 1..n+1, a millisecond apart from t0),
// as the watchers' memory tests load it, and returns its last seq.
func LargeSession(ctx context.Context, st *logstore.Store, id string, n, size int, t0 time.Time) (uint64, error) {
	content := strings.Repeat("x", size)
	last := uint64(n) + 1
	for seq := uint64(1); seq <= last; seq++ {
		typ, data := schema.TypeMessageUser, `{"content":"`+content+`"}`
		if seq == 1 {
			typ, data = schema.TypeSessionCreated, `{"title":"`+id+`"}`
		}
		ev := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: fmt.Sprintf("%s-%d", id, seq),
			Time: t0.Add(time.Duration(seq) * time.Millisecond), Type: typ, Data: json.RawMessage(data)}
		if _, err := Publish(ctx, st, ev); err != nil {
			return 0, err
		}
	}
	return last, nil
}
