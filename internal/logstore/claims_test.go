package logstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A claim is read as its revision (0: none) and dropped only at the
// revision it was read at: a holder that claimed the session again since
// keeps its claim.
func TestClaimRevisionAndDrop(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if rev, err := st.ClaimRevision(ctx, "c-1"); rev != 0 || err != nil {
		t.Fatalf("unclaimed: revision %d, %v", rev, err)
	}
	// Taking a lease records the claim.
	if err := st.RenewLease(ctx, "c-1", "h1", time.Now()); err != nil {
		t.Fatal(err)
	}
	rev, err := st.ClaimRevision(ctx, "c-1")
	if rev == 0 || err != nil {
		t.Fatalf("claimed: revision %d, %v", rev, err)
	}
	if err := st.DropClaim(ctx, "c-1", rev+1); err == nil {
		t.Fatal("dropped a claim at a revision it is not at")
	}
	if err := st.DropClaim(ctx, "c-1", rev); err != nil {
		t.Fatal(err)
	}
	if rev, err := st.ClaimRevision(ctx, "c-1"); rev != 0 || err != nil {
		t.Fatalf("dropped: revision %d, %v", rev, err)
	}
}
