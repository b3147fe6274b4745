package forker

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// publishAround stores a message on a session's subject around the writer
// (the test's connection may publish anywhere); seq 0: no SL-Seq header.
func (e *env) publishAround(id string, body []byte, seq uint64) {
	e.t.Helper()
	loc, _ := logstore.Locate(id)
	m := nats.NewMsg(loc.Subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, id+":around-"+strconv.FormatUint(seq, 10)+"-"+strconv.Itoa(len(body)))
	if seq != 0 {
		m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	}
	if _, err := natstest.JetStream(e.t, e.nc).PublishMsg(e.ctx, m); err != nil {
		e.t.Fatal(err)
	}
}

func envelopeOf(id string, seq uint64, eventID, typ, turn string, data string) []byte {
	b, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: eventID,
		Time: time.Now().UTC(), Type: typ, TurnID: turn, Data: json.RawMessage(data)})
	if err != nil {
		panic(err)
	}
	return b
}

// A parent that holds a message that is not a valid event of it is
// refused with unreadable, and no child is written.
func TestForkRefusesUnreadableParent(t *testing.T) {
	e := newEnv(t, nil)
	closeTurn := func(id string, seq uint64) { // a valid-looking event after the bad one
		e.publishAround(id, envelopeOf(id, seq, "after-"+strconv.FormatUint(seq, 10), schema.TypeToolResult, "t3", `{"status":"not_started"}`), seq)
	}
	for _, tc := range []struct {
		name string
		bad  func(id string)
	}{
		{"GarbageAtTail", func(id string) { e.publishAround(id, []byte("\x00 not an event"), 0) }},
		{"GarbageInside", func(id string) { e.publishAround(id, []byte(`{"seq":12`), 12); closeTurn(id, 12) }},
		{"ForgedSeq", func(id string) {
			e.publishAround(id, envelopeOf(id, 3, "forged", schema.TypeMessageUser, "", `{"content":"forged"}`), 3)
			closeTurn(id, 12)
		}},
		{"ForeignSession", func(id string) {
			e.publishAround(id, envelopeOf("other", 12, "forged", schema.TypeMessageUser, "", `{"content":"forged"}`), 12)
			closeTurn(id, 12)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, child := "p-"+tc.name, "c-"+tc.name
			e.appendLines(parent, basic...)
			tc.bad(parent)
			_, err := e.fork(Request{ParentID: parent, ChildID: child})
			wantCode(t, err, schema.CodeUnreadable)
			e.noChild(child)
		})
	}
}
