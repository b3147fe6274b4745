package writer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// badMsg is a message that is not a valid event for session sid stored
// after its seq 2, as a client with rights on the stream (written around
// the writer) can publish it.
func badMsg(t *testing.T, kind, sid string) *nats.Msg {
	t.Helper()
	event := func(e schema.Envelope, headerSeq string) *nats.Msg {
		b, err := schema.Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		h := nats.Header{}
		h.Set(logstore.HeaderMsgID, logstore.MsgID(e.SessionID, e.EventID))
		h.Set(logstore.HeaderType, e.Type)
		h.Set(logstore.HeaderSeq, headerSeq)
		return &nats.Msg{Subject: logstore.SubjectPrefix + sid, Header: h, Data: b}
	}
	env := schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: 3, EventID: "bad-" + kind,
		Time: time.Now().UTC(), Type: schema.TypeMessageUser, Data: []byte(`{"content":"bad"}`)}
	switch kind {
	case "Garbage":
		return &nats.Msg{Subject: logstore.SubjectPrefix + sid, Data: []byte("\x00 not an event {")}
	case "ForgedSeq":
		env.Seq = 7
		return event(env, "7")
	case "SeqZero":
		env.Seq = 0
		return event(env, "0")
	case "HeaderSeq":
		return event(env, "9")
	case "ForeignSession":
		env.SessionID = "other"
		return event(env, "3")
	}
	t.Fatalf("kind %s", kind)
	return nil
}

// A message that is not a valid event for its session (garbage, a forged
// seq, an event of another session) makes appends to the session answer
// unreadable: a definite code, never outcome_unknown or not_committed,
// whether the writer folds the session from scratch, catches a cached
// state up, or learns of it from a refused publish. Other sessions are
// untouched.
func TestUnreadableSession(t *testing.T) {
	e := newEnv(t, envOpts{store: logstore.Config{RequestTimeout: 2 * time.Second}})
	ctx := context.Background()
	js := natstest.JetStream(t, e.nc)
	mustOK(t, e.nc, map[string]any{"sessionId": "fine", "events": events(created())})
	for _, kind := range []string{"Garbage", "ForgedSeq", "SeqZero", "HeaderSeq", "ForeignSession"} {
		t.Run(kind, func(t *testing.T) {
			sid := "bad-" + kind
			mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(created(), userEv("u1", "one"))})
			// A second writer with the session cached at seq 2, to catch up.
			cached, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
			if err != nil {
				t.Fatal(err)
			}
			catchUp := direct(t, cached)
			if r := catchUp(map[string]any{"sessionId": sid, "expectedSeq": 1, "events": events(userEv("u1", "one"))}); !r.ok.Duplicate {
				t.Fatalf("cache the session: %+v %+v", r.ok, r.err)
			}
			if _, err := js.PublishMsg(ctx, badMsg(t, kind, sid)); err != nil {
				t.Fatal(err)
			}
			cold, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
			if err != nil {
				t.Fatal(err)
			}
			nextEv := func() []map[string]any { return events(userEv("next-"+time.Now().Format("150405.000000000"), "x")) }
			for _, tc := range []struct {
				name string
				send func(map[string]any) reply
				req  map[string]any
			}{
				// The running writer's cache is at seq 2: its publish is
				// refused (the position is taken) and resolved.
				{"Warm/Tail", func(r map[string]any) reply { return appendReq(t, e.nc, r) }, map[string]any{"events": nextEv()}},
				{"Warm/Expected", func(r map[string]any) reply { return appendReq(t, e.nc, r) }, map[string]any{"expectedSeq": 2, "events": nextEv()}},
				// An expectation past the cached tail: the cached state is
				// caught up.
				{"CatchUp", catchUp, map[string]any{"expectedSeq": 3, "events": nextEv()}},
				{"Cold/Tail", direct(t, cold), map[string]any{"events": nextEv()}},
				{"Cold/Expected", direct(t, cold), map[string]any{"expectedSeq": 2, "events": nextEv()}},
				// A retry of a stored event is no way around it.
				{"Retry", func(r map[string]any) reply { return appendReq(t, e.nc, r) }, map[string]any{"expectedSeq": 1, "events": events(userEv("u1", "one"))}},
				// Asked again, the answer is the same.
				{"Again", func(r map[string]any) reply { return appendReq(t, e.nc, r) }, map[string]any{"events": nextEv()}},
			} {
				tc.req["sessionId"] = sid
				before := streamMsgs(t, e.nc)
				r := tc.send(tc.req)
				if r.err == nil || r.err.Code != schema.CodeUnreadable {
					t.Errorf("%s: got %+v %+v, want unreadable", tc.name, r.ok, r.err)
				}
				if after := streamMsgs(t, e.nc); after != before {
					t.Errorf("%s: stream went from %d to %d messages", tc.name, before, after)
				}
			}
			if r := mustOK(t, e.nc, map[string]any{"sessionId": "fine", "events": events(userEv("fine-"+kind, "ok"))}); r.Duplicate {
				t.Fatalf("other session: %+v", r)
			}
		})
	}
}
