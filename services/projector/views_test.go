package projector

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
)

// TestAppendContextEntryIsMarshal: the hand-written context entry is byte
// for byte what json.Marshal writes, on the load generator's traffic and on
// the values it must leave to json.Marshal.
func TestAppendContextEntryIsMarshal(t *testing.T) {
	fleet := loadgen.NewFleet("c", 5, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var evs []schema.Envelope
	for range 400 {
		evs = append(evs, fleet.Next())
	}
	base := schema.Envelope{Seq: 9, Type: schema.TypeMessageUser, TurnID: "t1"}
	for _, d := range []string{
		``, `{}`, `{"content":"a b"}`, `{ "content":"a"}`, "{\"content\":\"a\"}\n", `{"content":"<b>"}`,
		`{"content":"a & b"}`, `{"content":"\u003c"}`, `{"content":"x\"<"}`, `{"content":"\\"}`, `{"content":"\\<"}`,
		"{\"content\":\"\u2028\"}", "{\"content\":\"\u2029x\"}", "{\"content\":\"\u2027\"}", `{"a":[1, 2]}`,
		`{"a":[1,2],"b":{"c":null}}`, `{"content":"é ü 漢"}`,
	} {
		e := base
		e.Data = json.RawMessage(d)
		evs = append(evs, e)
	}
	for _, id := range []string{"a<b", "a\"b", `a\b`, "é", "a b", "a\x7f"} {
		e := base
		e.TurnID = id
		evs = append(evs, e)
		e = base
		e.Type = schema.TypeToolRequested
		e.ToolCallID, e.AttemptID, e.Synthetic = id, id, true
		evs = append(evs, e)
	}
	visible := 0
	for i := range evs {
		var want []byte
		if role, data := contextOf(&evs[i]); role != "" {
			want = marshalContextEntry(&evs[i], role, data)
		}
		got := appendContextEntry([]byte("prefix"), &evs[i])
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("event %d %+v:\n got %s\nwant %s", i, evs[i], got[len("prefix"):], want)
		}
		if want != nil {
			visible++
		}
	}
	if visible < 100 {
		t.Fatalf("only %d model-visible events", visible)
	}
}
