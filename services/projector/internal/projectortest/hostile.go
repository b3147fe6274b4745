package projectortest

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Hostile is a message written straight to a session's subject, around
// the writer, by a connection allowed to (here the test's superuser).
type Hostile struct {
	Name string
	// Body is the message for session id whose events 1..4 are stored;
	// seq is its SL-Seq header (0: none).
	Body func(id, other string) (body []byte, seq uint64)
}

// envelope is a user message of session id numbered seq.
func envelope(id string, seq uint64, eventID string) []byte {
	b, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: eventID,
		Time: T0, Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"forged"}`)})
	if err != nil {
		panic(err)
	}
	return b
}

// Hostiles are the hostile messages the tests store.
var Hostiles = []Hostile{
	{"Garbage", func(id, _ string) ([]byte, uint64) { return []byte("\x00\xff not an event {"), 0 }},
	{"GarbageWithSeqHeader", func(id, _ string) ([]byte, uint64) { return []byte(`{"seq":5`), 5 }},
	{"ForgedSeqBackwards", func(id, _ string) ([]byte, uint64) { return envelope(id, 2, "forged-2"), 2 }},
	{"ForgedSeqRepeat", func(id, _ string) ([]byte, uint64) { return envelope(id, 4, "forged-4"), 4 }},
	{"ForeignSession", func(_, other string) ([]byte, uint64) { return envelope(other, 5, "forged-5"), 5 }},
	{"NewerSchema", func(id, _ string) ([]byte, uint64) {
		return []byte(`{"schemaVersion":9,"sessionId":"` + id + `","seq":5,"eventId":"forged-5","time":"2026-12-01T10:00:00Z","type":"message/user","data":{"content":"forged"}}`), 5
	}},
}

// PublishHostile stores body on the subject of session id straight in
// its stream, with SL-Seq seq (0: none), as a connection allowed to write
// around the writer does.
func PublishHostile(t *testing.T, e *Env, id string, body []byte, seq uint64) {
	t.Helper()
	loc, _ := logstore.Locate(id)
	m := nats.NewMsg(loc.Subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, id+":hostile")
	if seq != 0 {
		m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	}
	if _, err := natstest.JetStream(t, e.NC).PublishMsg(e.Ctx, m); err != nil {
		t.Fatal(err)
	}
}
