package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// watching opens a store with lease TTL ttl on a server of its own and a
// lease watch on it, both ended with the test.
func watching(t *testing.T, ttl time.Duration) (*logstore.Store, *logstore.LeaseWatch, context.Context) {
	t.Helper()
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{LeaseTTL: ttl})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	w, err := st.WatchLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return st, w, ctx
}

// TestWatchLeasesAndClaims: a lease watch sees a renewal, and the lease's
// end when its TTL runs out; the claim it left is listed.
func TestWatchLeasesAndClaims(t *testing.T) {
	st, w, ctx := watching(t, time.Second)
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
	// A dropped claim whose put is on the first page and one whose put
	// comes after it: the drop of each is the last entry of its key.
	for _, id := range []string{"c-0007", "c-1500"} {
		rev, err := st.ClaimRevision(ctx, id)
		if err != nil || rev == 0 {
			t.Fatalf("claim of %s: %d, %v", id, rev, err)
		}
		if err := st.DropClaim(ctx, id, rev); err != nil {
			t.Fatal(err)
		}
	}
	want = slices.DeleteFunc(want, func(id string) bool { return id == "c-0007" || id == "c-1500" })
	var got []string
	if err := st.ClaimedSessions(ctx, func(id string) { got = append(got, id) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d claimed sessions, want %d", len(got), len(want))
	}
}

// TestEndLease: a lease is ended only at the revision its key is still at;
// a renewal (or the expiry marker) stored after the revision the caller
// read makes the end fail, and nothing is written. The watch tells an end
// from an expiry, and a holder takes the ended lease again.
func TestEndLease(t *testing.T) {
	st, w, ctx := watching(t, time.Hour)
	if err := st.EndLease(ctx, "e-1", 0); err != nil {
		t.Fatalf("end of a key without entries, expecting none: %v", err)
	}
	if c, ok := w.Next(ctx); !ok || c.SessionID != "e-1" || !c.Ended || c.Renewed {
		t.Fatalf("change %+v %v, want e-1 ended", c, ok)
	}
	if err := st.RenewLease(ctx, "e-2", "agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	rec, err := st.LeaseRecord(ctx, "e-2")
	if err != nil || !rec.Live() {
		t.Fatalf("lease %+v %v", rec, err)
	}
	if c, ok := w.Next(ctx); !ok || c.SessionID != "e-2" || !c.Renewed || c.Revision != rec.Revision {
		t.Fatalf("change %+v %v, want e-2 renewed at revision %d", c, ok, rec.Revision)
	}
	// The holder renews after the read: the end at the read's revision fails.
	if err := st.RenewLease(ctx, "e-2", "agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []uint64{0, rec.Revision} {
		if err := st.EndLease(ctx, "e-2", rev); !errors.Is(err, logstore.ErrLeaseChanged) {
			t.Fatalf("end at stale revision %d: %v, want ErrLeaseChanged", rev, err)
		}
	}
	now, err := st.LeaseRecord(ctx, "e-2")
	if err != nil || !now.Live() || now.Revision <= rec.Revision {
		t.Fatalf("after the failed ends the lease is %+v %v, want the renewal", now, err)
	}
	if err := st.EndLease(ctx, "e-2", now.Revision); err != nil {
		t.Fatal(err)
	}
	if l, _, err := st.GetLease(ctx, "e-2"); err != nil || l != nil {
		t.Fatalf("ended lease still there: %+v %v", l, err)
	}
	if err := st.TakeLease(ctx, "e-2", "agent-2", time.Now(), false); err != nil {
		t.Fatalf("a holder takes an ended lease: %v", err)
	}
}
