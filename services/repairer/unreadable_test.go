package repairer

import (
	"context"
	"fmt"
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
func (e *env) publishAround(id string, body []byte, seq uint64) uint64 {
	e.t.Helper()
	loc, _ := logstore.Locate(id)
	m := nats.NewMsg(loc.Subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, id+":around-"+strconv.Itoa(len(body)))
	if seq != 0 {
		m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	}
	ack, err := natstest.JetStream(e.t, e.nc).PublishMsg(context.Background(), m)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func forged(id string, seq uint64) []byte {
	b, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: "forged",
		Time: time.Now().UTC(), Type: schema.TypeTurnEnded, TurnID: "t1", Data: []byte(`{"reason":"completed"}`)})
	if err != nil {
		panic(err)
	}
	return b
}

// An orphaned session that holds a message that is not a valid event of
// it is skipped (a log line, checks{outcome="unreadable"}), never
// repaired, never retried in a loop; on demand it is refused with
// unreadable; other orphans are repaired as ever.
func TestUnreadableSessionSkipped(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name string
		body func(id string) ([]byte, uint64)
	}{
		{"Garbage", func(string) ([]byte, uint64) { return []byte("\x00 not an event"), 0 }},
		{"ForgedSeq", func(id string) ([]byte, uint64) { return forged(id, 2), 2 }},
		{"ForeignSession", func(string) ([]byte, uint64) { return forged("ok-Garbage", 4), 4 }},
	}
	last := map[string]uint64{}
	for _, c := range cases {
		bad, ok := "bad-"+c.name, "ok-"+c.name
		e.appendEvents(bad, evCreated, evTurn, evRequested)
		e.appendEvents(ok, evCreated, evTurn, evRequested)
		body, seq := c.body(bad)
		last[bad] = e.publishAround(bad, body, seq)
		e.claim(bad, "agent")
		e.claim(ok, "agent")
	}
	r := e.start(Config{Grace: testGrace, SweepInterval: 100 * time.Millisecond})
	unreadable := r.svc.m.checks.WithLabelValues("unreadable")
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, c := range cases {
			if !e.fold("ok-" + c.name).Paused {
				return fmt.Errorf("ok-%s not repaired", c.name)
			}
		}
		// Every bad session met at least twice (expiry and sweeps).
		if n := counter(t, unreadable); n < float64(2*len(cases)) {
			return fmt.Errorf("unreadable checks %v", n)
		}
		return nil
	})
	if err := r.svc.Ready(); err != nil {
		t.Fatalf("repairer not ready: %v", err)
	}
	for _, c := range cases {
		bad := "bad-" + c.name
		loc, _ := logstore.Locate(bad)
		st, err := natstest.JetStream(t, e.nc).Stream(context.Background(), loc.Stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(context.Background(), loc.Subject)
		if err != nil {
			t.Fatal(err)
		}
		if m.Sequence != last[bad] {
			t.Fatalf("%s: something was appended after the bad message (stream seq %d, then %d)", bad, last[bad], m.Sequence)
		}
		reply, _ := e.request(`{"sessionId":"` + bad + `","force":true}`)
		if errCode(reply) != string(schema.CodeUnreadable) {
			t.Fatalf("%s: repair on demand: %v", bad, reply)
		}
	}
	if got := counter(t, r.svc.m.errors); got != 0 {
		t.Fatalf("errors metric %v: an unreadable session is not an error to retry", got)
	}
}
