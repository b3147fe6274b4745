package projector_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

func corpus(n int) [][]byte {
	f := gen.NewFleet("d", 10, 1, projectortest.T0)
	var out [][]byte
	for range n {
		e := f.Next()
		b, _ := schema.Encode(&e)
		out = append(out, b)
	}
	return out
}

// TestDecodeMatchesSchemaDecode: on the projector's own kind of traffic,
// schema.Decode's fast path accepts and refuses exactly what the strict
// path does, and yields the same envelope.
func TestDecodeMatchesSchemaDecode(t *testing.T) {
	docs := corpus(300)
	docs = append(docs,
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","ignorable":false,"synthetic":false,"data":{"content":"x","content":"y"}}`),
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","Type":"session/closed","ignorable":false,"synthetic":false,"data":{}}`),
		[]byte(`{"schemaVersion":1,"sessionId":"a","sessionId":"b","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`),
		[]byte(`{"schemaVersion":2,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`),
		[]byte(`{"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"step/started","turnId":"t","stepId":"s"}`),
		[]byte("{\"schemaVersion\":1,\"sessionId\":\"a\",\"seq\":1,\"eventId\":\"e\",\"time\":\"2026-01-01T00:00:00Z\",\"type\":\"message/user\",\"ignorable\":false,\"synthetic\":false,\"data\":{\"content\":\"\xff\"}}"),
		[]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"message/user","ignorable":false,"synthetic":false,"data":{},"extra":1}`),
		[]byte(`not json`),
	)
	for i, d := range docs {
		want, werr := schema.Decode(d)
		got, gerr := schema.DecodeStrict(d)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(want, got) {
			t.Fatalf("doc %d %s: schema.Decode %+v %v, fast %+v %v", i, d, want, werr, got, gerr)
		}
	}
	_ = json.Valid
}

func BenchmarkDecode(b *testing.B) {
	docs := corpus(1000)
	b.Run("schema.Decode", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			schema.Decode(docs[i%len(docs)])
		}
	})
	b.Run("schema.DecodeStrict", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			schema.DecodeStrict(docs[i%len(docs)])
		}
	})
}
