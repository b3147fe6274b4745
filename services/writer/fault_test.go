package writer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// reopen shuts the server down and starts a new one on the same
// directory, to count what really reached the disk.
func reopen(t *testing.T, e *env) (*logstore.Store, *nats.Conn) {
	t.Helper()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	srv := natstest.RunServerDir(t, e.dir)
	nc := natstest.Connect(t, srv)
	st, err := logstore.Open(context.Background(), nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st, nc
}

// not_committed: JetStream is stopped, so the publish (warm cache) or
// the read of the session (cold cache) finds no responder and nothing can
// have been stored. On one stream and on three partitions of one node (a
// cluster loses no single JetStream this way: the fault suite breaks one).
func TestAppendNotCommitted(t *testing.T) {
	natstest.ForEachLayout(t, testAppendNotCommitted, singleNode...)
}

// singleNode are the layouts of one node: tests that stop its JetStream
// and reopen its directory.
var singleNode = []natstest.Layout{{Partitions: 1, Nodes: 1}, {Partitions: 3, Nodes: 1}}

func testAppendNotCommitted(t *testing.T, l natstest.Layout) {
	// The JetStream API of a server whose JetStream is stopped does not
	// answer: reads wait for the request timeout.
	e := newEnv(t, envOpts{store: logstore.Config{RequestTimeout: time.Second, Partitions: l.Partitions}})
	mustOK(t, e.nc, map[string]any{"sessionId": "warm", "events": events(created())})
	if err := e.srv.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	r := appendReq(t, e.nc, map[string]any{"sessionId": "warm", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
	if r.code() != string(schema.CodeNotCommitted) || r.header != string(schema.CodeNotCommitted) {
		t.Fatalf("warm: %s %+v", r.code(), r.err)
	}
	r = appendReq(t, e.nc, map[string]any{"sessionId": "never", "events": events(created())})
	if r.code() != string(schema.CodeNotCommitted) {
		t.Fatalf("cold: %s %+v", r.code(), r.err)
	}
	st, _ := reopen(t, e)
	if n := len(stored(t, st, "warm")); n != 1 {
		t.Fatalf("warm has %d events, want 1", n)
	}
	if n := len(stored(t, st, "never")); n != 0 {
		t.Fatalf("never has %d events, want 0", n)
	}
}

// outcome_unknown: JetStream stores the event, the acknowledgement is lost
// and JetStream goes away before the writer can resolve it (re-send and
// read both fail). The writer must not claim either outcome; the event is
// stored once, and the client's retry of the same request, once JetStream
// is back, is answered as a duplicate. On one stream and on three
// partitions of one node.
func TestAppendOutcomeUnknown(t *testing.T) {
	natstest.ForEachLayout(t, testAppendOutcomeUnknown, singleNode...)
}

func testAppendOutcomeUnknown(t *testing.T, l natstest.Layout) {
	dir := t.TempDir()
	srv := natstest.RunServerDir(t, dir)
	var broken atomic.Bool
	e := newEnv(t, envOpts{srv: srv, store: logstore.Config{Partitions: l.Partitions, ResolveAttempts: 2, RequestTimeout: time.Second, FaultHook: func(s logstore.FaultStage) error {
		if s == logstore.FaultAck && broken.CompareAndSwap(false, true) {
			if err := srv.DisableJetStream(); err != nil {
				t.Errorf("disable JetStream: %v", err)
			}
			return errors.New("injected: ack lost")
		}
		return nil
	}}})
	e.dir = dir
	req := map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(ev(schema.TypeSessionCreated, "eventId", "ev-1"))}
	r := appendReq(t, e.nc, req)
	if r.code() != string(schema.CodeOutcomeUnknown) || r.header != string(schema.CodeOutcomeUnknown) {
		t.Fatalf("got %s %+v, want outcome_unknown", r.code(), r.err)
	}
	st, snc := reopen(t, e)
	evs := stored(t, st, "s1")
	if len(evs) != 1 || evs[0].EventID != "ev-1" {
		t.Fatalf("stored %+v, want ev-1 once", evs)
	}
	// The retry against a writer on the recovered server.
	nc, err := nats.Connect(snc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	startWriter(t, st, snc, writerConfig())
	r = appendReq(t, nc, req)
	if r.err != nil || !r.ok.Duplicate || r.ok.LastSeq != 1 {
		t.Fatalf("retry: %+v %+v", r.ok, r.err)
	}
	if n := len(stored(t, st, "s1")); n != 1 {
		t.Fatalf("%d events after retry", n)
	}
}

// outcome_unknown on three partitions of an R3 cluster: the event is
// committed (a quorum stored it), its acknowledgement is lost and the
// partition's leader and one more node stop before the writer can resolve
// it. The follower left has no quorum: the re-send and the read go
// unanswered. (A leader that shuts down hands its leadership to a follower
// it picks, which may be the one left, and a leader left alone answers
// reads from its own state until it notices, up to 10 s later, that it lost
// its quorum; the writer would then resolve the append, correctly, as
// stored. The test has that node step down at once.) Once the nodes are
// back, the client's retry is answered as a duplicate at the same seq, read
// from the partition's new leader.
func TestAppendOutcomeUnknownR3(t *testing.T) {
	d := natstest.RunLayout(t, natstest.Layout{Partitions: 3, Nodes: 3})
	c := d.Cluster
	layout, err := logstore.NewLayout(3)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := layout.Locate("s1")
	if err != nil {
		t.Fatal(err)
	}
	var broken atomic.Bool
	var down []int
	e := newEnv(t, envOpts{url: d.URL, store: logstore.Config{Partitions: 3, Replicas: 3, ResolveAttempts: 2, RequestTimeout: time.Second,
		FaultHook: func(s logstore.FaultStage) error {
			if s == logstore.FaultAck && broken.CompareAndSwap(false, true) {
				lead := c.StreamLeader(loc.Stream)
				down = []int{lead, (lead + 1) % len(c.Servers)}
				for _, i := range down {
					c.Servers[i].Shutdown()
				}
				left := c.Servers[(lead+2)%len(c.Servers)]
				// The hand-over may still be under way: watch for a while.
				for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					if left.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, loc.Stream) {
						if err := left.JetStreamStepdownStream(server.DEFAULT_GLOBAL_ACCOUNT, loc.Stream); err != nil {
							t.Errorf("step down: %v", err)
						}
					}
				}
				if left.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, loc.Stream) {
					t.Errorf("the node left still leads %s", loc.Stream)
				}
				return errors.New("injected: ack lost")
			}
			return nil
		}}})
	d.WaitLeaders(e.nc)
	req := map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(ev(schema.TypeSessionCreated, "eventId", "ev-1"))}
	if r := appendReq(t, e.nc, req); r.code() != string(schema.CodeOutcomeUnknown) || r.header != string(schema.CodeOutcomeUnknown) {
		t.Fatalf("got %s %+v, want outcome_unknown", r.code(), r.err)
	}
	for _, i := range down {
		c.Restart(i)
	}
	c.WaitMetaLeader()
	d.WaitLeaders(e.nc)
	r := appendReq(t, e.nc, req)
	if r.err != nil || !r.ok.Duplicate || r.ok.FirstSeq != 1 || r.ok.LastSeq != 1 {
		t.Fatalf("retry: %+v %+v", r.ok, r.err)
	}
	if evs := stored(t, e.st, "s1"); len(evs) != 1 || evs[0].EventID != "ev-1" {
		t.Fatalf("stored %+v, want ev-1 once", evs)
	}
}
