package forker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A rewritten body must be byte for byte what schema.Encode writes for
// the event with the new identity, for every layout a canonical body can
// have. (The forker copies canonical bodies with schema.CanonicalBody.Rewrite.)
func TestRewriteMatchesEncode(t *testing.T) {
	const parent, child = "parent-1", "child_2"
	var parents []schema.Envelope
	if err := gen.Exact(parent, 2000, func(e schema.Envelope) error {
		parents = append(parents, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 1, 2, 3, 456789000, time.UTC)
	for i, e := range []schema.Envelope{
		{Type: "x/y", Time: at, Data: json.RawMessage(`{}`)},
		{Type: "x/y", Time: at.Truncate(time.Second), TurnID: "t1", StepID: "s.1", AttemptID: "a:1", ToolCallID: "c-1", Ignorable: true, Data: json.RawMessage(`{"a":[1,{"b":"\u00e9\u2028"}],"c":"<&>"}`)},
		{Type: "x/y", Time: at, ToolCallID: "c", Synthetic: true, Data: json.RawMessage(`{"n":null}`)},
		{Type: "x/y", Time: at.In(time.FixedZone("x", 3600)), StepID: "s", Data: json.RawMessage(`[]`)},
	} {
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID = schema.Version, parent, uint64(len(parents)+1+i), "01JEVENT"
		parents = append(parents, e)
	}
	spliced := 0
	for _, e := range parents {
		body, err := schema.Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		dec, canonical, err := schema.DecodeCanonical(body)
		if err != nil {
			t.Fatalf("seq %d: %v", e.Seq, err)
		}
		cb, ok := schema.ScanCanonical(body)
		ok = ok && cb.SessionIs(parent)
		if canonical != ok {
			// Every canonical body scans; a scan of a body that is not
			// canonical is never used.
			t.Fatalf("seq %d: canonical %v but scanned %v: %s", e.Seq, canonical, ok, body)
		}
		if !ok {
			continue
		}
		spliced++
		if cb.Seq != e.Seq || cb.Type() != e.Type {
			t.Fatalf("seq %d: scanned seq %d type %q", e.Seq, cb.Seq, cb.Type())
		}
		id := "fork:0123456789abcdef:" + string(rune('0'+e.Seq%10))
		got, ok := cb.Rewrite(nil, schema.Identity{SessionID: child, Seq: e.Seq, EventID: id, Synthetic: true})
		if !ok {
			t.Fatalf("seq %d: not rewritten", e.Seq)
		}
		dec.SessionID, dec.EventID, dec.Synthetic = child, id, true
		want, err := schema.Encode(&dec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seq %d:\n got %s\nwant %s", e.Seq, got, want)
		}
	}
	if spliced < len(parents)-2 {
		t.Fatalf("only %d of %d bodies spliced", spliced, len(parents))
	}
}
