package logstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// TestLeaseNeverWithoutClaim: a claim that cannot be written leaves no
// lease behind (a lease without a claim is invisible to the repairer's
// sweep, and its expiry is ignored as "never claimed"); once the claim's
// bucket answers again the next take writes both.
func TestLeaseNeverWithoutClaim(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{LeaseTTL: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := natstest.JetStream(t, nc)
	cfg, err := js.KeyValue(ctx, logstore.ClaimBucket)
	if err != nil {
		t.Fatal(err)
	}
	status, err := cfg.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, logstore.ClaimBucket); err != nil {
		t.Fatal(err)
	}
	if err := st.TakeLease(ctx, "nc-1", "agent", time.Now(), false); err == nil {
		t.Fatal("lease taken while its claim could not be written")
	}
	rec, err := st.LeaseRecord(ctx, "nc-1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Lease != nil {
		t.Fatalf("lease %+v stored without a claim", rec.Lease)
	}
	if _, err := js.CreateKeyValue(ctx, status.(*jetstream.KeyValueBucketStatus).Config()); err != nil {
		t.Fatal(err)
	}
	if err := st.TakeLease(ctx, "nc-1", "agent", time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if rev, err := st.ClaimRevision(ctx, "nc-1"); err != nil || rev == 0 {
		t.Fatalf("claim revision %d, %v after the take: want a claim", rev, err)
	}
}

// ClaimedSessions lists every claimed session over several pages, and no
// session whose claim was dropped.
func TestClaimedSessionsPages(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	const n = 2100 // three pages
	want := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("c-%04d", i)
		if err := st.RenewLease(ctx, id, "agent", time.Now()); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	rev, err := st.ClaimRevision(ctx, "c-0007")
	if err != nil || rev == 0 {
		t.Fatalf("claim of c-0007: %d, %v", rev, err)
	}
	if err := st.DropClaim(ctx, "c-0007", rev); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(id string) bool { return id == "c-0007" })
	var got []string
	if err := st.ClaimedSessions(ctx, func(id string) { got = append(got, id) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d claimed sessions, want %d", len(got), len(want))
	}
}
