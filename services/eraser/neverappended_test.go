package eraser

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestEraseSessionNeverAppendedTo: a session that a writer took the lease
// of (and with it its claim and, sealing, its data key in SESSION_KEYS)
// but never stored an event of is erased: its records and its key go, and
// its audit counts no event. So is one of which only the key is left
// (its lease and claim entries gone). Before, the erase answered not_found (no
// event stored) and nothing removed the key.
func TestEraseSessionNeverAppendedTo(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, logstore.Config{SealBodies: true})
	e.claim("s-leased", "w1")
	e.claim("s-keyonly", "w2")
	kv, js := e.keys(), natstest.JetStream(t, e.nc)
	// s-keyonly: its lease and claim entries gone from their streams
	// (markers included), as after a bucket's limits dropped them.
	for _, b := range []string{logstore.LeaseBucket, logstore.ClaimBucket} {
		st, err := js.Stream(ctx, "KV_"+b)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+b+".s-keyonly")); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"s-leased", "s-keyonly"} {
		if _, err := kv.Get(ctx, id); err != nil {
			t.Fatalf("%s: no key before the erase: %v", id, err)
		}
	}
	// An eraser's store that has not cached the keys (the claims were
	// taken through e.store): the key is read from the bucket.
	fresh, err := logstore.Open(ctx, e.nc, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: fresh, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s-leased", "s-keyonly"} {
		got, err := svc.Erase(ctx, EraseRequest{SessionID: id, Reason: "privacy", By: "ops"})
		if err != nil || got.State != EraseDone {
			t.Fatalf("erase %s: %+v %v", id, got, err)
		}
		e.gone(id)
		e.keyGone(id)
	}
	recs := e.audits()
	if len(recs) != 2 || recs[0].Events != 0 || recs[1].Events != 0 {
		t.Fatalf("audits %+v, want two with no event", recs)
	}
	// A session of which nothing is stored at all is still not found.
	if _, err := svc.Erase(ctx, EraseRequest{SessionID: "s-none", Reason: "privacy", By: "ops"}); schema.CodeOf(err) != schema.CodeNotFound {
		t.Fatalf("erase of a session that does not exist: %v, want not_found", err)
	}
}
