package logstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// TestWatchLeasesAndClaims: a lease watch sees a renewal, and the lease's
// end when its TTL runs out; the claim it left is listed.
func TestWatchLeasesAndClaims(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{LeaseTTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := st.WatchLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := st.RenewLease(ctx, "w-1", "agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	c, ok := w.Next(ctx)
	if !ok || c.SessionID != "w-1" || !c.Renewed || c.At.IsZero() {
		t.Fatalf("first change %+v %v, want w-1 renewed", c, ok)
	}
	// No renewal: the TTL ends the lease, and the watch says so.
	c, ok = w.Next(ctx)
	if !ok || c.SessionID != "w-1" || c.Renewed {
		t.Fatalf("second change %+v %v, want w-1 gone", c, ok)
	}
	if err := st.RenewLease(ctx, "w-2", "agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, ok = w.Next(ctx); !ok || c.SessionID != "w-2" || !c.Renewed {
		t.Fatalf("third change %+v %v, want w-2 renewed", c, ok)
	}
	var claimed []string
	if err := st.ClaimedSessions(ctx, func(id string) { claimed = append(claimed, id) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, []string{"w-1", "w-2"}) {
		t.Fatalf("claimed %v, want [w-1 w-2]", claimed)
	}
}
