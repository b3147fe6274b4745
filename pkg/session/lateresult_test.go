package session

import (
	"encoding/json"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// tool/late-result is registered and ignorable: the fold takes it marked
// ignorable (it changes nothing: the repair's result stands) and refuses
// it unmarked.
func TestLateResultIsIgnorable(t *testing.T) {
	s := New("s-1")
	for _, e := range []schema.Envelope{
		{Type: schema.TypeSessionCreated, EventID: "e1", Data: json.RawMessage(`{}`)},
		{Type: schema.TypeToolLateResult, Ignorable: true, EventID: "e2", Data: json.RawMessage(`{"toolCallId":"c1","status":"ok"}`)},
	} {
		if err := s.Apply(&e); err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
	}
	e := schema.Envelope{Type: schema.TypeToolLateResult, EventID: "e3", Data: json.RawMessage(`{"toolCallId":"c1","status":"ok"}`)}
	if err := s.Apply(&e); schema.CodeOf(err) != schema.CodeInvalidEvent {
		t.Fatalf("unmarked tool/late-result: %v, want invalid_event", err)
	}
	if s.LastSeq != 2 {
		t.Fatalf("last seq %d, want 2", s.LastSeq)
	}
}
