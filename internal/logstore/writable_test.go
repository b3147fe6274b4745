package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestWritableDegraded: with one node of three down the streams keep a
// leader and a quorum (writable), but the replica on that node is not
// reached: Writable says degraded, naming it, and is fine again once the
// node is back.
func TestWritableDegraded(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, c.Servers[0])
	st := open(t, nc, logstore.Config{Replicas: 3})
	ctx := context.Background()
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		_, err := st.Writable(ctx)
		return err
	})
	// Stop a node that is not the one the store is connected to.
	down := 2
	c.Servers[down].Shutdown()
	c.Servers[down].WaitForShutdown()
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		leaders, err := st.Writable(ctx)
		var deg *logstore.DegradedError
		if !errors.As(err, &deg) {
			return fmt.Errorf("Writable = %v, want degraded", err)
		}
		if len(deg.Peers) == 0 || deg.Peers[0] != "S-3" {
			return fmt.Errorf("degraded names %v, want S-3", deg.Peers)
		}
		if len(leaders) != len(logstore.Streams())+2 {
			return fmt.Errorf("leaders %v", leaders)
		}
		return nil
	})
	c.Restart(down)
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		_, err := st.Writable(ctx)
		return err
	})
}

// TestCannotStore: while Config.CannotStore answers an error (up's full
// disk), an append is refused not_committed without being sent, a lease is
// not written and Writable says why; once it answers nil, the same append
// is stored.
func TestCannotStore(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	var full atomic.Bool
	full.Store(true)
	st := open(t, nc, logstore.Config{CannotStore: func() error {
		if full.Load() {
			return errors.New("disk full")
		}
		return nil
	}})
	ctx := context.Background()
	req := logstore.AppendRequest{SessionID: "s1", Events: events("s1", 1, 2, "e")}
	if _, err := st.Append(ctx, req); schema.CodeOf(err) != schema.CodeNotCommitted || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("append while full = %v, want not_committed naming the disk", err)
	}
	if evs, _, err := st.ReadEvents(ctx, "s1", 0); err != nil || len(evs) != 0 {
		t.Fatalf("stored while full: %d events (%v)", len(evs), err)
	}
	if err := st.TakeLease(ctx, "s1", "h", time.Now(), false); err == nil {
		t.Fatal("a lease was written while full")
	}
	if _, err := st.Writable(ctx); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Writable while full = %v", err)
	}
	full.Store(false)
	if _, err := st.Append(ctx, req); err != nil {
		t.Fatalf("append once space is back: %v", err)
	}
	if _, err := st.Writable(ctx); err != nil {
		t.Fatal(err)
	}
}
