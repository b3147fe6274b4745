package writer

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

var decodeSeeds = []string{
	`{"sessionId":"s1","expectedSeq":3,"holder":"h","events":[{"type":"message/user","data":{"content":"hi"}}]}`,
	`{"sessionId":"s1","holder":"h","takeover":true,"events":[]}`, `{"sessionId":"s1","takeover":null}`, `{"sessionId":"s1","takeover":1}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05.123456Z","type":"tool/started","turnId":"t","stepId":"s","attemptId":"a","toolCallId":"c","ignorable":false,"synthetic":true,"data":null}]}`,
	`{"sessionId":null,"expectedSeq":null,"events":null}`,
	`{"sessionId":"s\u0031","events":[null,{}]}`,
	`{"session\u0049d":"s1","events":[]}`,
	`{"sessionId":"s1","sessionId":"s2","events":[]}`,
	`{"sessionId":"s1","events":[{"type":"a","type":"b"}]}`,
	`{"sessionId":"s1","SessionID":"s2"}`,
	`{"sessionId":"s1","events":[{"Type":"x"}]}`,
	`{"sessionId":"s1","bogus":1}`,
	`{"sessionId":"s1","expectedSeq":-1}`, `{"sessionId":"s1","expectedSeq":1.5}`, `{"sessionId":"s1","expectedSeq":"1"}`,
	`{"sessionId":1}`, `{"sessionId":"s1","events":{}}`, `{"sessionId":"s1","events":[1]}`,
	`{"sessionId":"s1","events":[{"time":"yesterday"}]}`, `{"sessionId":"s1","events":[{"ignorable":1}]}`,
	`{"sessionId":"s1","events":[{"data":{"a":1,"a":2}}]}`, `{"sessionId":"s1"} x`, `[]`, `null`, ``, `{`,
	`{"sessionId":"s1","events":[{"data":` + strings.Repeat("[", 61) + strings.Repeat("]", 61) + `}]}`,
	`{"sessionId":"s1","events":[{"data":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":99999999999999999999}]}`,
}

// jsonSeeds are the seeds of schema.FuzzCheckJSON: documents the request
// decoder must check as schema.CheckJSON does.
var jsonSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `1E3`, `true`, `null`, ` {"a":1} `,
	`{"a":1,"a":2}`, `{"a":1,"b":{"a":2}}`, `{"a\u0062":1,"ab":2}`, `{"\ud800":1,"\udbff":2}`,
	`{"a":[1,2,{"b":null}],"c":"x\"y\\z\n"}`, `{"a":1}x`, `{"a":1} {}`, ``, `   `, `{`, `[1,]`, `{"a":}`,
	`01`, `1.`, `.5`, `-`, `+1`, `1e`, `"\x"`, "\"a\x01\"", `"\u12"`, `tru`, `nul`, `[`, `{"a" 1}`, `{1:2}`,
	"\"\xff\"", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"sessionId":"s1","events":[{"type":"message/user","data":{"content":"hi"}}]}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
}

func sameDecode(t *testing.T, b []byte) {
	var mine, std AppendRequest
	errMine := decodeAppend(b, &mine)
	errStd := schema.Unmarshal(b, &std)
	switch {
	case errMine == nil && errStd != nil:
		t.Fatalf("%q: decodeAppend accepts, schema.Unmarshal: %v", b, errStd)
	case errMine == nil:
		if !reflect.DeepEqual(mine, std) {
			t.Fatalf("%q:\nmine %+v\nstd  %+v", b, mine, std)
		}
	case errStd == nil:
		// Stricter only on key spelling (exact names).
		if !strings.Contains(errMine.Error(), "unknown field") && !strings.Contains(errMine.Error(), "too many keys") {
			t.Fatalf("%q: decodeAppend: %v; schema.Unmarshal accepts", b, errMine)
		}
	}
}

func TestDecodeAppendMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(decodeSeeds, jsonSeeds...) {
		sameDecode(t, []byte(s))
	}
}

// FuzzDecodeAppend holds the request decoder to schema.Unmarshal.
func FuzzDecodeAppend(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameDecode(t, b) })
}

// canonicalSeeds are append requests whose events are written as
// schema.Encode writes them (pkg/client sends them so), and near misses.
var canonicalSeeds = []string{
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05.123456Z","type":"tool/started","turnId":"t","stepId":"s","attemptId":"a","toolCallId":"c","ignorable":false,"synthetic":true,"data":{"a":[1,"x"]}}]}`,
	`{"sessionId":"s1","expectedSeq":3,"events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"message/user","ignorable":false,"synthetic":false,"data":{"content":"hi"}},{"schemaVersion":1,"sessionId":"s1","seq":5,"eventId":"e2","time":"2026-12-02T15:04:05Z","type":"source/line","ignorable":true,"synthetic":false,"data":{}}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"0001-01-01T00:00:00Z","type":"x","ignorable":false,"synthetic":false,"data":{}}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"x","ignorable":false,"synthetic":false,"data":{"a":1,"a":2}}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"x","ignorable":false,"synthetic":false,"data":{}},{"schemaVersion":1,"sessionId":"s1","seq":5,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"x","ignorable":false,"synthetic":false,"data":{},"extra":1}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"x","ignorable":false,"synthetic":false,"data":` + strings.Repeat("[", 61) + strings.Repeat("]", 61) + `}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"x","ignorable":false,"synthetic":false,"data":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05Z","type":"x","ignorable":false,"synthetic":false,"data":` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05+01:00","type":"x","ignorable":false,"synthetic":false,"data":"\u2028"}]}`,
}

// sameBodies holds decodeAppendBodies to decodeAppend: the same request
// or the same refusal, and every body it keeps is schema.Encode's for its
// event.
func sameBodies(t *testing.T, b []byte) {
	var plain, fast AppendRequest
	var bodies [][]byte
	errPlain := decodeAppend(b, &plain)
	errFast := decodeAppendBodies(b, &fast, &bodies)
	if (errPlain == nil) != (errFast == nil) {
		t.Fatalf("%q: decodeAppend %v, decodeAppendBodies %v", b, errPlain, errFast)
	}
	if errPlain != nil {
		return
	}
	if !reflect.DeepEqual(plain, fast) {
		t.Fatalf("%q:\nplain %+v\nfast  %+v", b, plain, fast)
	}
	if len(bodies) != len(fast.Events) {
		t.Fatalf("%q: %d bodies for %d events", b, len(bodies), len(fast.Events))
	}
	for i, body := range bodies {
		if body == nil {
			continue
		}
		e := fast.Events[i]
		enc, err := schema.Encode(&e)
		if err != nil || string(enc) != string(body) {
			t.Fatalf("%q: event %d kept as %q, Encode gives %q (%v)", b, i, body, enc, err)
		}
	}
}

func TestDecodeAppendBodies(t *testing.T) {
	for _, s := range append(append(canonicalSeeds, decodeSeeds...), jsonSeeds...) {
		sameBodies(t, []byte(s))
	}
	var req AppendRequest
	var bodies [][]byte
	if err := decodeAppendBodies([]byte(canonicalSeeds[1]), &req, &bodies); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 || bodies[0] == nil || bodies[1] == nil {
		t.Fatalf("canonical events not kept: %q", bodies)
	}
	if kept, _ := keepBodies(req.Events, bodies); kept == nil {
		t.Fatal("keepBodies drops canonical events")
	}
	// The zero time is replaced by the writer: its body is not kept.
	req, bodies = AppendRequest{}, nil
	if err := decodeAppendBodies([]byte(canonicalSeeds[2]), &req, &bodies); err != nil {
		t.Fatal(err)
	}
	if kept, _ := keepBodies(req.Events, bodies); kept != nil {
		t.Fatal("keepBodies keeps the body of an event whose time the writer replaces")
	}
}

// FuzzDecodeAppendBodies holds the canonical path of the request decoder
// to the general one.
func FuzzDecodeAppendBodies(f *testing.F) {
	for _, s := range append(canonicalSeeds, decodeSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameBodies(t, b) })
}

// BenchmarkDecodeAppend decodes a batch of 500 canonical events (1.5 KB
// of data each, as `bench import` appends them) by the general path and
// by the canonical one that keeps the bodies (Encode is then skipped).
func BenchmarkDecodeAppend(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"sessionId":"s1","expectedSeq":0,"events":[`)
	for i := range 500 {
		if i > 0 {
			body.WriteByte(',')
		}
		e := schema.Envelope{SchemaVersion: schema.Version, SessionID: "s1", Seq: uint64(i + 1), EventID: "e" + strings.Repeat("x", 20) + string(rune('a'+i%26)),
			Time: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Type: schema.TypeToolResult, TurnID: "t1", StepID: "s1", ToolCallID: "c1",
			Data: []byte(`{"output":"` + strings.Repeat(`result line of a typical tool output\n`, 40) + `","isError":false}`)}
		enc, err := schema.Encode(&e)
		if err != nil {
			b.Fatal(err)
		}
		body.Write(enc)
	}
	body.WriteString(`]}`)
	raw := []byte(body.String())
	b.Run("General+Encode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var req AppendRequest
			if err := decodeAppend(raw, &req); err != nil {
				b.Fatal(err)
			}
			for i := range req.Events {
				if _, err := schema.Encode(&req.Events[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Canonical", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var req AppendRequest
			var bodies [][]byte
			if err := decodeAppendBodies(raw, &req, &bodies); err != nil || bodies[len(bodies)-1] == nil {
				b.Fatal(err)
			}
		}
	})
}
