package forker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/bench/sessiongen"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The spliced child body must be byte for byte what schema.Encode writes
// for the child's event, for every layout a canonical parent body can have.
func TestSpliceMatchesEncode(t *testing.T) {
	const parent, child = "parent-1", "child_2"
	var parents []schema.Envelope
	if err := sessiongen.GenSession(parent, 2000, func(e schema.Envelope) error {
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
		sp, ok := splitBody(body, parent)
		if canonical != ok {
			// Every canonical body splits; a split of a body that is not
			// canonical is never used.
			t.Fatalf("seq %d: canonical %v but split %v: %s", e.Seq, canonical, ok, body)
		}
		if !ok {
			continue
		}
		spliced++
		if sp.seq != e.Seq || string(sp.typ) != e.Type {
			t.Fatalf("seq %d: split seq %d type %q", e.Seq, sp.seq, sp.typ)
		}
		id := "fork:0123456789abcdef:" + string(rune('0'+e.Seq%10))
		got := appendChild(nil, &sp, child, id)
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

// A body whose members are not laid out as schema.Encode writes them is
// not split. (The data value is not checked: only bodies that decoded as
// canonical are split.)
func TestSplitRefusesOtherLayouts(t *testing.T) {
	const sid = "p"
	for _, b := range []string{
		`{"schemaVersion":1,"sessionId":"q","seq":2,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":02,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e\"","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e","type":"a/b","time":"2026-01-01T00:00:00Z","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":0,"synthetic":false,"data":{}}`,
		`{"schemaVersion":0,"sessionId":"p","seq":2}`,
	} {
		if _, ok := splitBody([]byte(b), sid); ok {
			t.Errorf("split %s", b)
		}
	}
}
