package logstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// samePartition returns an id other than id whose events go to id's
// stream, so that the two interleave there.
func samePartition(t *testing.T, st *logstore.Store, id string) string {
	t.Helper()
	want, err := st.Locate(id)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		other := fmt.Sprintf("%s-other-%d", id, i)
		if loc, _ := st.Locate(other); loc.Stream == want.Stream {
			return other
		}
	}
}

// appendRun appends n events to the session after its tail.
func appendRun(t *testing.T, st *logstore.Store, sid string, n int) {
	t.Helper()
	ctx := context.Background()
	tail, err := st.Tail(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: tail.StreamSeq, Events: events(sid, tail.Seq+1, n, "e")}); err != nil {
		t.Fatal(err)
	}
}

// leaderBodies is every stored body of the session, read from the leader.
func leaderBodies(t *testing.T, st *logstore.Store, sid string) ([][]byte, logstore.Tail) {
	t.Helper()
	out, _, tail := leaderChain(t, st, sid)
	return out, tail
}

// leaderChain is every stored body of the session and its SL-Prev, read
// from the leader.
func leaderChain(t *testing.T, st *logstore.Store, sid string) ([][]byte, []string, logstore.Tail) {
	t.Helper()
	var out [][]byte
	var prevs []string
	tail, err := st.ReadSession(context.Background(), sid, 0, func(m *logstore.Msg) error {
		out, prevs = append(out, m.Data), append(prevs, m.Header.Get(logstore.HeaderPrev))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, prevs, tail
}

// checkChained checks ReadChained after seq from against what the leader
// holds (want, prevs) and against ReadBatch.
func checkChained(t *testing.T, st *logstore.Store, sid string, tail logstore.Tail, from, n, maxBytes int, want [][]byte, prevs []string) {
	t.Helper()
	got, err := st.ReadChained(context.Background(), sid, tail, uint64(from), n, maxBytes)
	if err != nil {
		t.Fatalf("after %d: %v", from, err)
	}
	batch, err := st.ReadBatch(context.Background(), sid, tail, uint64(from), n, maxBytes)
	if err != nil {
		t.Fatalf("after %d: %v", from, err)
	}
	checkBodies(t, got.Bodies, want, from, len(batch))
	checkBodies(t, batch, want, from, len(batch))
	wantHash := ""
	if from > 0 && from < len(want) {
		wantHash = logstore.ChainHash(want[from-1])
	}
	if got.PrevHash != wantHash || len(got.Prevs) != len(got.Bodies) {
		t.Fatalf("after %d: prev hash %q and %d SL-Prevs, want %q and %d", from, got.PrevHash, len(got.Prevs), wantHash, len(got.Bodies))
	}
	for i, p := range got.Prevs {
		if p != prevs[from+i] || (from+i > 0 && p != logstore.ChainHash(want[from+i-1])) {
			t.Fatalf("after %d: event %d's SL-Prev %q, want %q", from, i, p, prevs[from+i])
		}
	}
}

// interleavedOnOneNode stores runs of size events of sid, each followed
// by one event of another session, on a new single node.
func interleavedOnOneNode(t *testing.T, sid string, runs, size int) (*nats.Conn, *logstore.Store, [][]byte, logstore.Tail) {
	t.Helper()
	return interleavedOnOneNodeWith(t, logstore.Config{}, sid, runs, size)
}

// interleavedOnOneNodeWith is interleavedOnOneNode with a store of cfg.
func interleavedOnOneNodeWith(t *testing.T, cfg logstore.Config, sid string, runs, size int) (*nats.Conn, *logstore.Store, [][]byte, logstore.Tail) {
	t.Helper()
	nc := natstest.Connect(t, natstest.RunServer(t))
	st := open(t, nc, cfg)
	other := samePartition(t, st, sid)
	for i := 0; i < runs; i++ {
		appendRun(t, st, sid, size)
		appendRun(t, st, other, 1)
	}
	want, tail := leaderBodies(t, st, sid)
	return nc, st, want, tail
}

// checkBodies checks that got is want[from:from+n].
func checkBodies(t *testing.T, got, want [][]byte, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("after %d: %d events, want %d", from, len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[from+i]) {
			t.Fatalf("after %d: event %d is %.80s, want %.80s", from, i, got[i], want[from+i])
		}
	}
}

// A batch read returns what the leader holds: from any seq, among other
// sessions' messages of the same stream, over more than one batch,
// bounded by maxBytes, and alike through every node of a cluster (where
// the node's own replica answers the direct get).
func TestReadBatch(t *testing.T) { natstest.ForEachLayout(t, testReadBatch) }

func testReadBatch(t *testing.T, l natstest.Layout) {
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	cfg := logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()}
	st := open(t, nc, cfg)
	d.WaitLeaders(nc)
	ctx := context.Background()
	const sid = "batch"
	other := samePartition(t, st, sid)
	// Runs of 1..13 events between runs of the other session's.
	for i := 0; i < 90; i++ {
		appendRun(t, st, sid, 1+i%13)
		appendRun(t, st, other, 1+i%3)
	}
	want, prevs, tail := leaderChain(t, st, sid)
	n := len(want)
	if n < 600 || tail.StreamSeq < uint64(n)+100 {
		t.Fatalf("%d events up to stream seq %d: not interleaved enough", n, tail.StreamSeq)
	}
	stores := []*logstore.Store{st}
	if d.Cluster != nil {
		for _, s := range d.Cluster.Servers {
			c := natstest.Connect(t, s)
			stores = append(stores, open(t, c, cfg))
		}
		d.Cluster.WaitStreamsCurrent(st.Streams()...)
	}
	const batch = 250
	for i, s := range stores {
		for _, after := range []int{0, 1, 2, 7, 100, batch, 333, n - batch - 1, n - 2, n - 1, n} {
			got, err := s.ReadBatch(ctx, sid, tail, uint64(after), batch, 0)
			if err != nil {
				t.Fatalf("store %d after %d: %v", i, after, err)
			}
			checkBodies(t, got, want, after, min(batch, n-after))
			checkChained(t, s, sid, tail, after, batch, 0, want, prevs)
		}
		// The whole session, a batch at a time.
		var all [][]byte
		for len(all) < n {
			got, err := s.ReadBatch(ctx, sid, tail, uint64(len(all)), batch, 0)
			if err != nil || len(got) == 0 {
				t.Fatalf("store %d after %d: %d events, %v", i, len(all), len(got), err)
			}
			all = append(all, got...)
		}
		checkBodies(t, all, want, 0, n)
		// maxBytes: the event that reaches it is the last.
		got, err := s.ReadBatch(ctx, sid, tail, 10, batch, len(want[10])+len(want[11])+1)
		if err != nil {
			t.Fatal(err)
		}
		checkBodies(t, got, want, 10, 3)
		checkChained(t, s, sid, tail, 10, batch, len(want[10])+len(want[11])+1, want, prevs)
	}
	// Events appended after the tail was read are not part of it.
	appendRun(t, st, sid, 5)
	got, err := st.ReadBatch(ctx, sid, tail, uint64(n-3), batch, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkBodies(t, got, want, n-3, 3)
}

// A replica that holds only part of what the leader's tail covers (here a
// mirror that answers the stream's direct gets, with the session's last
// events deleted from it: an R3 follower behind its leader looks the same
// to a reader) never makes a batch read end early: what it lacks is read
// from the leader.
func TestReadBatchStaleReplica(t *testing.T) {
	const sid = "stale"
	nc, st, want, tail := interleavedOnOneNode(t, sid, 40, 5)
	ctx := context.Background()
	js := natstest.JetStream(t, nc)
	mirror, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "STALE", Mirror: &jetstream.StreamSource{Name: "SESSIONS"}, MirrorDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := mirror.Info(ctx)
		if err != nil || info.State.LastSeq < tail.StreamSeq {
			return fmt.Errorf("mirror at %+v, %v", info, err)
		}
		return nil
	})
	// The mirror loses the session's last 60 events (stream seqs run
	// one per message from 1 in both).
	loc, _ := st.Locate(sid)
	deleted := 0
	for seq := tail.StreamSeq; deleted < 60; seq-- {
		m, err := mirror.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject == loc.Subject {
			if err := mirror.DeleteMsg(ctx, seq); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	// Direct gets go to the stream or to its mirror, as they fall: 40
	// reads of each kind reach the mirror many times.
	_, prevs, _ := leaderChain(t, st, sid)
	for i := 0; i < 40; i++ {
		after := len(want) - 100 + i
		got, err := st.ReadBatch(ctx, sid, tail, uint64(after), 1000, 0)
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		checkBodies(t, got, want, after, len(want)-after)
		checkChained(t, st, sid, tail, after, 1000, 0, want, prevs)
		got, err = st.ReadBatch(ctx, sid, tail, uint64(len(want)-10), 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkBodies(t, got, want, len(want)-10, 10)
	}
}

// A session whose first events were deleted (an erase stopped halfway
// leaves it so) is not read from seq 1 as if it started later: a batch
// read from its start says ErrNotOnePerSeq; after the deleted events it
// reads as before.
func TestReadBatchPartlyErased(t *testing.T) {
	const sid = "partly"
	_, st, want, tail := interleavedOnOneNode(t, sid, 10, 4)
	ctx := context.Background()
	stop := errors.New("stop")
	deleted := 0
	if _, err := st.EraseEvents(ctx, sid, func() error {
		if deleted++; deleted == 3 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("erase: %v", err)
	}
	for _, after := range []uint64{0, 1, 2} {
		if got, err := st.ReadBatch(ctx, sid, tail, after, 100, 0); !errors.Is(err, logstore.ErrNotOnePerSeq) {
			t.Fatalf("after %d: %d events, %v; want ErrNotOnePerSeq", after, len(got), err)
		}
	}
	got, err := st.ReadBatch(ctx, sid, tail, 3, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkBodies(t, got, want, 3, len(want)-3)
}

// JudgeAfter finds the session's last stored event at or before a stream
// seq, among another session's messages: a judge that reads on from
// there judges what follows as a judge from the session's start would.
func TestJudgeAfter(t *testing.T) {
	const sid = "after"
	_, st, want, tail := interleavedOnOneNode(t, sid, 6, 3)
	ctx := context.Background()
	var at []uint64 // stream seq of each event
	if _, err := st.ReadSession(ctx, sid, 0, func(m *logstore.Msg) error { at = append(at, m.StreamSeq); return nil }); err != nil {
		t.Fatal(err)
	}
	if j, err := st.JudgeAfter(ctx, sid, 0); err != nil || j.Last.Exists() {
		t.Fatalf("at 0: %+v %v", j.Last, err)
	}
	for i, p := range at {
		for _, q := range []uint64{p, p + 1} {
			if i+1 < len(at) && q >= at[i+1] {
				continue
			}
			j, err := st.JudgeAfter(ctx, sid, q)
			if err != nil || j.Last.StreamSeq != p || j.Last.Seq != uint64(i+1) || j.Last.Hash != logstore.ChainHash(want[i]) || j.Last.EventID == "" {
				t.Fatalf("at %d: %+v %v; want seq %d at stream seq %d", q, j.Last, err, i+1, p)
			}
			n := 0
			if _, err := st.ReadJudged(ctx, &j, func(*logstore.Msg, *schema.Envelope) error { n++; return nil }); err != nil || n != len(at)-i-1 || j.Last.StreamSeq != tail.StreamSeq {
				t.Fatalf("read on from %d: %d events, at %d, %v", q, n, j.Last.StreamSeq, err)
			}
		}
	}
}
