package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// On a 3-node cluster, R3, three partitions: their leaders end on three
// different nodes, and appends, conflicts and reads work in each.
func TestPartitionsOnCluster(t *testing.T) {
	ctx := context.Background()
	st := openOnCluster(t, 3)
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		leaders, err := st.PartitionLeaders(ctx)
		if err != nil {
			return err
		}
		nodes := map[string]bool{}
		for _, l := range leaders {
			if l != "" {
				nodes[l] = true
			}
		}
		if len(nodes) == 3 {
			t.Logf("leaders %v", leaders)
			return nil
		}
		// A step-down in flight, or an election that landed on a busy node.
		if _, err := st.SpreadLeaders(ctx); err != nil {
			return err
		}
		return fmt.Errorf("leaders %v on %d nodes", leaders, len(nodes))
	})
	for i := range 9 {
		sid := "cl-" + strconv.Itoa(i)
		r, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, 2, "e")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: r.StreamSeq - 1, Events: events(sid, 3, 1, "x")})
		var ce *logstore.ConflictError
		if !errors.As(err, &ce) || ce.Tail.Seq != 2 {
			t.Fatalf("%s: stale expectation = %v, want conflict at 2", sid, err)
		}
		if tail, err := st.Tail(ctx, sid); err != nil || tail.Seq != 2 {
			t.Fatalf("%s: tail %+v, %v", sid, tail, err)
		}
	}
}

// Open on a cluster returns a store whose partitions can be written at
// once: a partition whose leader it moved (SpreadLeaders) has its new
// leader by then, so the first reads and appends of each partition do not
// meet a stream in election.
func TestPartitionsWritableAfterOpen(t *testing.T) {
	ctx := context.Background()
	st := openOnCluster(t, 2)
	seen := map[string]bool{}
	for i := 0; len(seen) < 2; i++ {
		sid := "open-" + strconv.Itoa(i)
		loc, err := st.Locate(sid)
		if err != nil {
			t.Fatal(err)
		}
		if seen[loc.Stream] {
			continue
		}
		seen[loc.Stream] = true
		if _, err := st.Tail(ctx, sid); err != nil {
			t.Fatalf("%s (%s): tail right after Open: %v", sid, loc.Stream, err)
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, 1, "e")}); err != nil {
			t.Fatalf("%s (%s): append right after Open: %v", sid, loc.Stream, err)
		}
	}
	leaders, err := st.PartitionLeaders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leaders %v", leaders)
	for name, l := range leaders {
		if l == "" {
			t.Errorf("%s has no leader after Open", name)
		}
	}
}

// openOnCluster opens a store of partitions partitions, R3, on a new
// 3-node cluster.
func openOnCluster(t *testing.T, partitions int) *logstore.Store {
	t.Helper()
	c := natstest.RunCluster(t, 3)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return open(t, nc, logstore.Config{Replicas: 3, Partitions: partitions})
}
