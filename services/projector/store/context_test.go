package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestAppendContextEntryIsMarshal: the hand-written context entry is byte
// for byte what json.Marshal writes, on the load generator's traffic and on
// the values it must leave to json.Marshal.
func TestAppendContextEntryIsMarshal(t *testing.T) {
	fleet := gen.NewFleet("c", 5, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
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

// canonicalEvents are events as the fold gets them: encoded as the writer
// stores them and decoded again, those whose body schema.DecodeCanonical
// finds canonical (the load generator's traffic, and data json.Marshal
// escapes or compacts, which Encode writes escaped and compact).
func canonicalEvents(tb testing.TB) []schema.Envelope {
	tb.Helper()
	fleet := gen.NewFleet("c", 5, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var in []schema.Envelope
	for range 400 {
		in = append(in, fleet.Next())
	}
	base := schema.Envelope{SchemaVersion: schema.Version, SessionID: "s", Seq: 9, EventID: "e9", Time: time.Unix(1, 0).UTC(), Type: schema.TypeMessageUser, TurnID: "t1"}
	for _, d := range []string{
		`{"content":"<b>"}`, `{"content":"a & b"}`, `{ "content":"a"}`, "{\"content\":\"\u2028\"}", `{"content":"é ü 漢"}`, `{"a":[1, 2]}`,
	} {
		e := base
		e.Data = json.RawMessage(d)
		in = append(in, e)
	}
	for _, id := range []string{"a<b", "é", "a b"} {
		e := base
		e.Type = schema.TypeToolRequested
		e.ToolCallID, e.AttemptID = id, id
		e.Data = json.RawMessage(`{"name":"x"}`)
		in = append(in, e)
	}
	var out []schema.Envelope
	for i := range in {
		body, err := schema.Encode(&in[i])
		if err != nil {
			tb.Fatal(err)
		}
		e, canonical, err := schema.DecodeCanonical(body)
		if err != nil {
			tb.Fatal(err)
		}
		if canonical {
			out = append(out, e)
		}
	}
	if len(out) < 400 {
		tb.Fatalf("only %d canonical bodies", len(out))
	}
	return out
}

// TestContextEntryOfCanonicalIsMarshal: the context entry of an event of a
// canonical body, its data taken as it is without a scan, is byte for byte
// what json.Marshal writes.
func TestContextEntryOfCanonicalIsMarshal(t *testing.T) {
	for i, e := range canonicalEvents(t) {
		var want []byte
		if role, data := contextOf(&e); role != "" {
			want = marshalContextEntry(&e, role, data)
		}
		if got := appendContextEntryOf(nil, &e, true); !bytes.Equal(got, want) {
			t.Fatalf("event %d %+v:\n got %s\nwant %s", i, e, got, want)
		}
	}
}

// BenchmarkContextEntry: the context entries of the load generator's
// events, their data scanned (scan) or taken as the decode found it
// (canonical).
func BenchmarkContextEntry(b *testing.B) {
	evs := canonicalEvents(b)
	for _, asIs := range []bool{false, true} {
		name := map[bool]string{false: "scan", true: "canonical"}[asIs]
		b.Run(name, func(b *testing.B) {
			var dst []byte
			for b.Loop() {
				for i := range evs {
					dst = appendContextEntryOf(dst[:0], &evs[i], asIs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
		})
	}
}
