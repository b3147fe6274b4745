package writer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// shortWindow is the stream's duplicate window in these tests: JetStream
// forgets a message id after it, and only the writer's index remains.
const shortWindow = time.Second

// waitWindowPassed waits until JetStream's duplicate window no longer
// holds messages stored before the call in the stream of session sid: a
// probe id stored now is published again until the stream stores it again
// (a separate session of the same partition, so the sessions under test
// are untouched).
func waitWindowPassed(t *testing.T, e *env, sid string) {
	t.Helper()
	js := natstest.JetStream(t, e.nc)
	ctx := context.Background()
	want, err := e.st.Locate(sid)
	if err != nil {
		t.Fatal(err)
	}
	var loc logstore.Location
	probe := fmt.Sprintf("window-probe-%d", time.Now().UnixNano())
	for loc.Stream != want.Stream {
		probe += "x"
		if loc, err = e.st.Locate(probe); err != nil {
			t.Fatal(err)
		}
	}
	send := func() (*jetstream.PubAck, error) {
		return js.Publish(ctx, loc.Subject, []byte("probe"), jetstream.WithMsgID(probe))
	}
	if ack, err := send(); err != nil || ack.Duplicate {
		t.Fatalf("probe: %+v %v", ack, err)
	}
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ack, err := send()
		if err != nil {
			return err
		}
		if ack.Duplicate {
			return fmt.Errorf("probe id still in the duplicate window")
		}
		return nil
	})
}

func userEv(id, content string) map[string]any {
	return ev(schema.TypeMessageUser, "eventId", id, "data", map[string]any{"content": content})
}

// storedOnce fails the test if an event id is stored twice, and returns
// how many events the session holds.
func storedOnce(t *testing.T, st *logstore.Store, sid string) int {
	t.Helper()
	evs := stored(t, st, sid)
	if err := checkContiguous(evs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	for _, e := range evs {
		if s, dup := seen[e.EventID]; dup {
			t.Fatalf("event id %s stored at seqs %d and %d", e.EventID, s, e.Seq)
		}
		seen[e.EventID] = e.Seq
	}
	return len(evs)
}

// uniqueIDCases runs the cases of an event id unique in its session
// against send (a writer behind NATS, or a cold one called directly), on
// session sid holding created (1), a (2), b1 b2 (3, 4) and newer events.
func uniqueIDCases(t *testing.T, st *logstore.Store, sid string, send func(map[string]any) reply) {
	t.Helper()
	want := storedOnce(t, st, sid)
	dupOf := func(name string, req map[string]any, first, last uint64) {
		t.Helper()
		req["sessionId"] = sid
		r := send(req)
		if r.err != nil || !r.ok.Duplicate || r.ok.FirstSeq != first || r.ok.LastSeq != last {
			t.Fatalf("%s: got %+v %+v, want duplicate of seqs %d..%d", name, r.ok, r.err, first, last)
		}
	}
	refused := func(name string, req map[string]any, index int, mention ...string) {
		t.Helper()
		req["sessionId"] = sid
		r := send(req)
		if r.err == nil || r.err.Code != schema.CodeInvalidEvent {
			t.Fatalf("%s: got %+v %+v, want invalid_event", name, r.ok, r.err)
		}
		if r.err.Index == nil || *r.err.Index != index {
			t.Errorf("%s: index %v, want %d (%s)", name, r.err.Index, index, r.err.Message)
		}
		for _, m := range mention {
			if !strings.Contains(r.err.Message, m) {
				t.Errorf("%s: message %q does not mention %q", name, r.err.Message, m)
			}
		}
	}
	// (b) A retry without expectedSeq, of one event and of a batch.
	dupOf("RetryTail/One", map[string]any{"events": events(userEv("a", "A"))}, 2, 2)
	dupOf("RetryTail/Batch", map[string]any{"events": events(userEv("b1", "B1"), userEv("b2", "B2"))}, 3, 4)
	// With the expectation it was sent with, and with a later one.
	dupOf("RetryExpected/One", map[string]any{"expectedSeq": 1, "events": events(userEv("a", "A"))}, 2, 2)
	dupOf("RetryExpected/Batch", map[string]any{"expectedSeq": 2, "events": events(userEv("b1", "B1"), userEv("b2", "B2"))}, 3, 4)
	dupOf("RetryExpected/Later", map[string]any{"expectedSeq": uint64(want), "events": events(userEv("a", "A"))}, 2, 2)
	// (a) A batch of a stored id and a new one: refused, naming the id
	// and its seq, wherever the stored id is in the batch.
	refused("Mixed/StoredFirst", map[string]any{"events": events(userEv("a", "A"), userEv("new-1", "N"))}, 0, "eventId a ", "seq 2")
	refused("Mixed/StoredLast", map[string]any{"events": events(userEv("new-1", "N"), userEv("b2", "B2"))}, 1, "eventId b2 ", "seq 4")
	refused("Mixed/Expected", map[string]any{"expectedSeq": uint64(want), "events": events(userEv("new-1", "N"), userEv("a", "A"))}, 1, "eventId a ", "seq 2")
	// (c) A stored id with other content, at the tail and older.
	tail := fmt.Sprintf("z%d", want-5)
	refused("OtherContent/Tail", map[string]any{"events": events(userEv(tail, "changed"))}, 0, "eventId "+tail+" ", fmt.Sprintf("seq %d", want), "other content")
	refused("OtherContent/TailExpected", map[string]any{"expectedSeq": uint64(want), "events": events(userEv(tail, "changed"))}, 0, "other content")
	refused("OtherContent/Old", map[string]any{"events": events(userEv("a", "changed"))}, 0, "seq 2", "other content")
	refused("OtherContent/Type", map[string]any{"events": events(ev(schema.TypeTurnStarted, "eventId", "a", "turnId", "t1"))}, 0, "seq 2")
	refused("OtherContent/BatchSecond", map[string]any{"events": events(userEv("b1", "B1"), userEv("b2", "changed"))}, 1, "seq 4")
	// Stored ids in another order than stored.
	refused("Order", map[string]any{"events": events(userEv("b2", "B2"), userEv("b1", "B1"))}, 1, "seq 3")
	// Fields the writer fills are not content: a retry giving them.
	ts := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	dupOf("WriterFields", map[string]any{"events": events(ev(schema.TypeMessageUser, "eventId", "a", "seq", 2, "sessionId", sid,
		"schemaVersion", 1, "time", ts, "data", map[string]any{"content": "A"}))}, 2, 2)
	if got := storedOnce(t, st, sid); got != want {
		t.Fatalf("%d events stored, want %d", got, want)
	}
}

// uniqueIDs stores the session the cases need, then runs them inside
// JetStream's duplicate window, after it (and after more than 64 newer
// events), and through a writer that folds the session cold.
func uniqueIDs(t *testing.T, e *env) {
	const sid = "uniq"
	send := func(req map[string]any) reply { return appendReq(t, e.nc, req) }
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "expectedSeq": 0, "events": events(created())})
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv("a", "A"))})
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv("b1", "B1"), userEv("b2", "B2"))})
	for i := range 5 {
		mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv(fmt.Sprintf("z%d", i), "Z"))})
	}
	t.Run("InWindow", func(t *testing.T) { uniqueIDCases(t, e.st, sid, send) })
	for i := 5; i < 75; i++ {
		mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv(fmt.Sprintf("z%d", i), "Z"))})
	}
	waitWindowPassed(t, e, sid)
	t.Run("AfterWindow", func(t *testing.T) { uniqueIDCases(t, e.st, sid, send) })
	t.Run("ColdWriter", func(t *testing.T) {
		w, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
		if err != nil {
			t.Fatal(err)
		}
		uniqueIDCases(t, e.st, sid, direct(t, w))
	})
	// New events still append after all that.
	if r := mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv("last", "L"))}); r.Duplicate || r.FirstSeq != 1+1+2+75+1 {
		t.Fatalf("new event: %+v", r)
	}
}

// Layouts of one node and of an R3 cluster, each on one stream and on
// three partitions.
var (
	r1Layouts = []natstest.Layout{{Partitions: 1, Nodes: 1}, {Partitions: 3, Nodes: 1}}
	r3Layouts = []natstest.Layout{{Partitions: 1, Nodes: 3}, {Partitions: 3, Nodes: 3}}
)

// shortWindowEnv is an env on layout l whose streams forget message ids
// after shortWindow.
func shortWindowEnv(t *testing.T, l natstest.Layout) *env {
	t.Helper()
	return newEnvLayout(t, l, envOpts{store: logstore.Config{Duplicates: shortWindow}})
}

// An event id is unique in its session for the session's whole life (not
// only JetStream's duplicate window), on a single node.
func TestUniqueEventIDsR1(t *testing.T) {
	natstest.ForEachLayout(t, func(t *testing.T, l natstest.Layout) { uniqueIDs(t, shortWindowEnv(t, l)) }, r1Layouts...)
}

// The same on an R3 cluster, where JetStream deduplicates before it
// checks the expected sequence.
func TestUniqueEventIDsR3(t *testing.T) {
	natstest.ForEachLayout(t, func(t *testing.T, l natstest.Layout) { uniqueIDs(t, shortWindowEnv(t, l)) }, r3Layouts...)
}

// Two writers, one whose cached state is behind: the append it sends
// after its stale tail is refused by JetStream (wrong last sequence on a
// single node; on R3, inside the window, a duplicate id first), and the
// answer comes from the stored events.
func TestUniqueEventIDsStaleWriterR1(t *testing.T) {
	natstest.ForEachLayout(t, func(t *testing.T, l natstest.Layout) { staleWriter(t, shortWindowEnv(t, l)) }, r1Layouts...)
}

func TestUniqueEventIDsStaleWriterR3(t *testing.T) {
	natstest.ForEachLayout(t, func(t *testing.T, l natstest.Layout) { staleWriter(t, shortWindowEnv(t, l)) }, r3Layouts...)
}

func staleWriter(t *testing.T, e *env) {
	w2, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	call := direct(t, w2)
	const sid = "stale"
	if r := call(map[string]any{"sessionId": sid, "events": events(created())}); r.err != nil {
		t.Fatal(r.err)
	}
	// w2 caches seq 1; the other writer stores x at seq 2.
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv("x", "X"))})
	r := call(map[string]any{"sessionId": sid, "events": events(userEv("x", "other"))})
	if r.err == nil || r.err.Code != schema.CodeInvalidEvent || !strings.Contains(r.err.Message, "seq 2") {
		t.Fatalf("stale writer, other content: %+v %+v", r.ok, r.err)
	}
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(userEv("y", "Y"))})
	if r := call(map[string]any{"sessionId": sid, "events": events(userEv("y", "Y"))}); r.err != nil || !r.ok.Duplicate || r.ok.FirstSeq != 3 {
		t.Fatalf("stale writer, retry: %+v %+v", r.ok, r.err)
	}
	if n := storedOnce(t, e.st, sid); n != 3 {
		t.Fatalf("%d events", n)
	}
}

// direct calls w's Append (no endpoint: a writer that is not running has
// only the state it folds itself).
func direct(t *testing.T, w *writer.Service) func(map[string]any) reply {
	return func(req map[string]any) reply {
		t.Helper()
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := w.Append(context.Background(), b)
		if err != nil {
			d := wire.Detail(err)
			return reply{err: &d}
		}
		return reply{ok: rep}
	}
}

// An agent's expectedSeq past the tail the writer reads: a conflict while
// the log is whole (the agent is wrong), not_committed while a replica is
// not reached (a leader cut off by a partition answers reads from what it
// has, and a conflict would send a live agent away from its session; the
// fault suite's agents were repaired under them after one). On one stream
// and on three partitions of an R3 cluster (the replica down is one of the
// session's partition).
func TestExpectedPastTailWhileDegraded(t *testing.T) {
	natstest.ForEachLayout(t, testExpectedPastTailWhileDegraded,
		natstest.Layout{Partitions: 1, Nodes: 3}, natstest.Layout{Partitions: 3, Nodes: 3})
}

func testExpectedPastTailWhileDegraded(t *testing.T, l natstest.Layout) {
	c := natstest.RunCluster(t, 3)
	e := newEnv(t, envOpts{url: c.Servers[0].ClientURL(), store: logstore.Config{Replicas: 3, Partitions: l.Partitions}})
	const sid = "ahead"
	loc, err := e.st.Locate(sid)
	if err != nil {
		t.Fatal(err)
	}
	lead := c.WaitStreamLeader(loc.Stream)
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(created(), userEv("x", "X"))})
	ahead := map[string]any{"sessionId": sid, "expectedSeq": 5, "events": events(userEv("y", "Y"))}
	if r := appendReq(t, e.nc, ahead); r.code() != string(schema.CodeConflict) {
		t.Fatalf("expectedSeq past the tail, log whole: %s %s", r.code(), r.raw)
	}
	// Stop a node that is neither the writer's nor the stream's leader.
	down := 1
	for down == 0 || down == lead {
		down++
	}
	c.Servers[down].Shutdown()
	c.Servers[down].WaitForShutdown()
	natstest.CheckFor(t, 30*time.Second, 250*time.Millisecond, func() error {
		if r := appendReq(t, e.nc, ahead); r.code() != string(schema.CodeNotCommitted) {
			return fmt.Errorf("expectedSeq past the tail, a replica down: %s %s", r.code(), r.raw)
		}
		return nil
	})
	if n := len(stored(t, e.st, sid)); n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
	c.Restart(down)
	natstest.CheckFor(t, 30*time.Second, 250*time.Millisecond, func() error {
		if r := appendReq(t, e.nc, ahead); r.code() != string(schema.CodeConflict) {
			return fmt.Errorf("expectedSeq past the tail, log whole again: %s %s", r.code(), r.raw)
		}
		return nil
	})
}
