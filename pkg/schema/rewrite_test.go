package schema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Every identity member is rewritten, the seq and synthetic both ways, and
// an identity whose strings Encode would escape is refused.
func TestRewriteIdentity(t *testing.T) {
	e := schema.Envelope{SchemaVersion: schema.Version, SessionID: "a", Seq: 7, EventID: "e7", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Type: "x/y", TurnID: "t", Synthetic: true, Data: json.RawMessage(`{"k":"v"}`)}
	body, err := schema.Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	cb, ok := schema.ScanCanonical(body)
	if !ok || !cb.SessionIs("a") || cb.SessionIs("b") || !cb.Synthetic || cb.Ignorable {
		t.Fatalf("scan of %s: %+v %v", body, cb, ok)
	}
	for _, id := range []schema.Identity{
		{SessionID: "b", Seq: 1, EventID: "x", Synthetic: false},
		{SessionID: "c-d_e", Seq: 18446744073709551615, EventID: "", Synthetic: true},
	} {
		got, ok := cb.Rewrite([]byte("keep:"), id)
		w := e
		w.SessionID, w.Seq, w.EventID, w.Synthetic = id.SessionID, id.Seq, id.EventID, id.Synthetic
		want, _ := schema.Encode(&w)
		if !ok || string(got) != "keep:"+string(want) {
			t.Fatalf("%+v:\n got %s\nwant keep:%s", id, got, want)
		}
	}
	for _, id := range []schema.Identity{
		{SessionID: "", EventID: "x"},
		{SessionID: "b", EventID: `x"y`},
		{SessionID: "b", EventID: "<x>"},
		{SessionID: "b\\", EventID: "x"},
		{SessionID: "b", EventID: "é"},
	} {
		if _, ok := cb.Rewrite(nil, id); ok {
			t.Errorf("rewrote with %+v", id)
		}
	}
}

// A body whose members are not laid out as schema.Encode writes them is
// not scanned. (The time and data values are not checked: only bodies that
// decoded as canonical are rewritten.)
func TestScanRefusesOtherLayouts(t *testing.T) {
	const sid = "p"
	for _, b := range []string{
		`{"schemaVersion":1,"sessionId":"q","seq":2,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":02,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e\"","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e","type":"a/b","time":"2026-01-01T00:00:00Z","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","ignorable":0,"synthetic":false,"data":{}}`,
		`{"schemaVersion":0,"sessionId":"p","seq":2}`,
		`{"schemaVersion":1,"sessionId":"p","seq":2,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"a/b","turnId":"","ignorable":false,"synthetic":false,"data":{}}`,
	} {
		if cb, ok := schema.ScanCanonical([]byte(b)); ok && cb.SessionIs(sid) {
			t.Errorf("scanned %s", b)
		}
	}
}

// benchBodies are canonical bodies of ordinary events.
func benchBodies(b *testing.B) [][]byte {
	b.Helper()
	var out [][]byte
	for i := range 1000 {
		e := schema.Envelope{SchemaVersion: schema.Version, SessionID: "parent-session", Seq: uint64(i + 2), EventID: "01JEVENTID" + string(rune('a'+i%26)),
			Time: time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC), Type: "tool/result", TurnID: "turn-1", ToolCallID: "call-7",
			Data: json.RawMessage(`{"status":"ok","output":"` + strings.Repeat("line of tool output ", 15) + `","exitCode":0,"files":["a.go","b.go"]}`)}
		body, err := schema.Encode(&e)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}

// What the forker's copy of a canonical parent body costs: rewriting its
// identity, against decoding and encoding the event (the path it replaces).
func BenchmarkRewrite(b *testing.B) {
	bodies := benchBodies(b)
	id := schema.Identity{SessionID: "child-session", EventID: "fork:0123456789abcdef:1", Synthetic: true}
	b.Run("rewrite", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			body := bodies[i%len(bodies)]
			c, ok := schema.ScanCanonical(body)
			if !ok || !c.SessionIs("parent-session") {
				b.Fatal("not canonical")
			}
			id.Seq = c.Seq
			if _, ok := c.Rewrite(make([]byte, 0, len(body)+32), id); !ok {
				b.Fatal("not rewritten")
			}
		}
	})
	b.Run("decode-encode", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			e, err := schema.Decode(bodies[i%len(bodies)])
			if err != nil {
				b.Fatal(err)
			}
			e.SessionID, e.EventID, e.Synthetic = id.SessionID, id.EventID, true
			if _, err := schema.Encode(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The scan's decode of a canonical body (the fast path).
func BenchmarkDecodeCanonical(b *testing.B) {
	bodies := benchBodies(b)
	for i := 0; b.Loop(); i++ {
		if _, canonical, err := schema.DecodeCanonical(bodies[i%len(bodies)]); err != nil || !canonical {
			b.Fatal(err)
		}
	}
}
