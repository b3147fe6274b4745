package schema

import (
	"reflect"
	"testing"
	"time"
)

// Decode's fast path (plain decode, re-encode, compare bytes) must accept
// and refuse exactly what the strict path does, with the same envelope.
func TestDecodeFastPathMatchesStrict(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 123456000, time.UTC)
	var docs [][]byte
	for i, e := range []Envelope{
		{Type: TypeSessionCreated, Data: []byte(`{"title":"t","labels":{"a":"b"}}`)},
		{Type: TypeTurnStarted, TurnID: "t1", Data: []byte(`{"input":"hi \u00e9 \"q\""}`)},
		{Type: TypeToolRequested, TurnID: "t1", ToolCallID: "c1", Data: []byte(`{"name":"sh","input":{"cmd":["ls","-l"],"n":1.5e3}}`)},
		{Type: TypeToolResult, TurnID: "t1", ToolCallID: "c1", Synthetic: true, Data: []byte(`{"status":"outcome_unknown"}`)},
		{Type: "x/display", Ignorable: true, Data: []byte(`{"k":[1,2,{"z":null}]}`)},
		{Type: TypeMessageUser, Data: []byte(`{"content":"<b>&amp;</b>"}`)},
	} {
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID, e.Time = 1, "s-1", uint64(i+1), "e", t0
		b, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	docs = append(docs,
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","ignorable":false,"synthetic":false,"data":{"content":"x","content":"y"}}`),
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","Type":"session/closed","ignorable":false,"synthetic":false,"data":{}}`),
		[]byte(`{"schemaVersion":1,"sessionId":"a","sessionId":"b","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`),
		[]byte(`{"schemaVersion":2,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`),
		[]byte(`{"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"step/started","turnId":"t","stepId":"s"}`),
		[]byte("{\"schemaVersion\":1,\"sessionId\":\"a\",\"seq\":1,\"eventId\":\"e\",\"time\":\"2026-01-01T00:00:00Z\",\"type\":\"message/user\",\"ignorable\":false,\"synthetic\":false,\"data\":{\"content\":\"\xff\"}}"),
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","ignorable":false,"synthetic":false,"data":{"content":"\ud800"}}`),
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","ignorable":false,"synthetic":false,"data":{},"extra":1}`),
		[]byte(`not json`),
		[]byte(`{"schemaVersion":1}`),
	)
	for i, d := range docs {
		want, werr := DecodeStrict(d)
		got, gerr := Decode(d)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(want, got) {
			t.Fatalf("doc %d %s: strict %+v %v, Decode %+v %v", i, d, want, werr, got, gerr)
		}
	}
}
