package agentlog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// memLog is a Log in memory that holds its sessions to pkg/session's
// rules, as the writer does, and records the size of each append.
type memLog struct {
	events  map[string][]schema.Envelope
	appends []int // bytes of each append's events, encoded
}

func (l *memLog) Tail(_ context.Context, id string) (uint64, string, error) {
	evs := l.events[id]
	if len(evs) == 0 {
		return 0, "", nil
	}
	return uint64(len(evs)), evs[len(evs)-1].EventID, nil
}

func (l *memLog) Events(_ context.Context, id string, after uint64, fn func(schema.Envelope) error) error {
	for _, e := range l.events[id][after:] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) Append(_ context.Context, id string, expected uint64, events []schema.Envelope) (uint64, bool, error) {
	stored := l.events[id]
	if uint64(len(stored)) != expected {
		return 0, false, fmt.Errorf("conflict: tail %d, expected %d", len(stored), expected)
	}
	st := session.New(id)
	for i := range stored {
		if err := st.Apply(&stored[i]); err != nil {
			return 0, false, err
		}
	}
	size := 0
	for _, e := range events {
		e.SessionID, e.Seq, e.SchemaVersion = id, st.LastSeq+1, schema.Version
		if err := st.Apply(&e); err != nil {
			return 0, false, err
		}
		b, err := schema.Encode(&e)
		if err != nil {
			return 0, false, err
		}
		size += len(b)
		stored = append(stored, e)
	}
	l.appends = append(l.appends, size)
	if l.events == nil {
		l.events = map[string][]schema.Envelope{}
	}
	l.events[id] = stored
	return uint64(len(stored)), false, nil
}

func (l *memLog) Fork(context.Context, string, string, uint64) error {
	return fmt.Errorf("no forks here")
}

// Appends end at MaxBytes as well as at Batch: events of 100 KB each go
// three to a request under 350 KB, and none is over it.
func TestAppendSinkSizesBatchesInBytes(t *testing.T) {
	l := &memLog{}
	s := &AppendSink{Ctx: context.Background(), Log: l, MaxBytes: 350 << 10}
	if err := s.Session(Plan{ID: "s-1", FirstSeq: 1}); err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(map[string]string{"content": strings.Repeat("x", 100<<10)})
	events := []schema.Envelope{{Type: schema.TypeSessionCreated, EventID: "created", Data: json.RawMessage("{}")}}
	for i := range 10 {
		events = append(events, schema.Envelope{Type: schema.TypeMessageUser, EventID: fmt.Sprintf("u%d.0", i), Data: big})
	}
	for i, e := range events {
		e.Seq = uint64(i + 1)
		if err := s.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Done(); err != nil {
		t.Fatal(err)
	}
	if got := len(l.events["s-1"]); got != len(events) {
		t.Fatalf("%d events stored, want %d", got, len(events))
	}
	for i, n := range l.appends {
		if n > 350<<10 {
			t.Errorf("append %d holds %d bytes of events, over 350 KiB", i, n)
		}
	}
	if len(l.appends) != 4 {
		t.Errorf("%d appends (%v bytes), want 4: three 100 KB events to each", len(l.appends), l.appends)
	}
}

// A source whose stored session has a repair in it (paused, the call
// closed as outcome_unknown) continues: resumed, the real result kept as
// tool/late-result, the turn continued, a turn/ended of the ended turn
// kept as source/unfit; a second pass (compared by id) appends nothing.
func TestAppendSinkContinuesAfterRepair(t *testing.T) {
	l := &memLog{}
	src := func(n int) []schema.Envelope {
		all := []schema.Envelope{
			{Type: schema.TypeSessionCreated, EventID: "created", Data: json.RawMessage(`{}`)},
			{Type: schema.TypeTurnStarted, TurnID: "t.1", EventID: "k1.0", Data: json.RawMessage(`{}`)},
			{Type: schema.TypeToolRequested, TurnID: "t.1", ToolCallID: "c1", EventID: "k2.0", Data: json.RawMessage(`{"name":"sh","input":{}}`)},
			{Type: schema.TypeToolStarted, TurnID: "t.1", ToolCallID: "c1", EventID: "k2.1", Data: json.RawMessage(`{}`)},
			// The file grows after the repair:
			{Type: schema.TypeToolResult, TurnID: "t.1", ToolCallID: "c1", EventID: "k3.0", Data: json.RawMessage(`{"status":"ok","output":"done"}`)},
			{Type: schema.TypeAttemptStarted, TurnID: "t.1", AttemptID: "a.4", EventID: "k4.0", Data: json.RawMessage(`{}`)},
			{Type: schema.TypeMessageAssistant, TurnID: "t.1", AttemptID: "a.4", EventID: "k4.1", Data: json.RawMessage(`{"content":"ok"}`)},
			{Type: schema.TypeTurnEnded, TurnID: "t.1", EventID: "k4.2", Data: json.RawMessage(`{"reason":"completed"}`)},
		}
		for i := range all {
			all[i].Seq = uint64(i + 1)
		}
		return all[:n]
	}
	pass := func(n int) *AppendSink {
		t.Helper()
		s := &AppendSink{Ctx: context.Background(), Log: l, By: "test"}
		if err := s.Session(Plan{ID: "s-1", FirstSeq: 1}); err != nil {
			t.Fatal(err)
		}
		for _, e := range src(n) {
			if err := s.Event(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Done(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	pass(4)
	st := session.New("s-1")
	for i := range l.events["s-1"] {
		_ = st.Apply(&l.events["s-1"][i])
	}
	repair := session.PlanRepair(st, session.RepairOptions{Reason: "lease expired"})
	for i := range repair {
		repair[i].SessionID = "s-1"
	}
	l.events["s-1"] = append(l.events["s-1"], repair...)
	pass(8)
	var types []string
	for _, e := range l.events["s-1"][4+len(repair):] {
		types = append(types, e.Type+" "+e.TurnID)
	}
	want := []string{"session/resumed ", "tool/late-result ", "turn/started t.1:c", "attempt/started t.1:c", "message/assistant t.1:c", "turn/ended t.1:c"}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("after the repair:\n got %v\nwant %v", types, want)
	}
	n := len(l.events["s-1"])
	if s := pass(8); s.added != 0 || len(l.events["s-1"]) != n {
		t.Fatalf("a second pass added %d events", len(l.events["s-1"])-n)
	}
}
