package repairer

import (
	"bytes"
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// The batched direct read returns what the store's leader read returns,
// from the start and from a cached position, and refuses a tail it cannot
// reach.
func TestReadSessionMatchesStore(t *testing.T) {
	e := newEnv(t)
	svc, err := New(Config{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.appendEvents("r-1", evCreated, evTurn, evRequested)
	e.appendEvents("r-other", evCreated) // interleaved in the stream
	e.appendEvents("r-1", evStarted)
	want, wantTail, err := e.store.ReadEvents(ctx, "r-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int{0, 1, 3} {
		var after, afterSeq uint64
		if from > 0 {
			after, afterSeq = want[from-1].StreamSeq, want[from-1].Seq
		}
		var got []*logstore.Msg
		tail, err := svc.readSession(ctx, "r-1", after, afterSeq, func(m *logstore.Msg) error {
			got = append(got, m)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if tail != wantTail || len(got) != len(want)-from {
			t.Fatalf("from %d: tail %+v (want %+v), %d events (want %d)", from, tail, wantTail, len(got), len(want)-from)
		}
		for i, m := range got {
			w, err := e.store.NextAfter(ctx, "r-1", want[from+i].StreamSeq-1)
			if err != nil {
				t.Fatal(err)
			}
			if m.StreamSeq != w.StreamSeq || !bytes.Equal(m.Data, w.Data) {
				t.Fatalf("from %d event %d: stream seq %d, want %d (same body %v)", from, i, m.StreamSeq, w.StreamSeq, bytes.Equal(m.Data, w.Data))
			}
		}
	}
	if msgs, ok := svc.directRead(ctx, "r-1", 0, len(want), wantTail.StreamSeq); !ok || len(msgs) != len(want) {
		t.Fatalf("direct read of the whole session: %d events, ok %v", len(msgs), ok)
	}
	// A tail the replica does not have (yet): refused, for the store to read.
	if _, ok := svc.directRead(ctx, "r-1", 0, len(want)+1, wantTail.StreamSeq+100); ok {
		t.Fatal("direct read accepted a tail beyond the stored events")
	}
	if _, ok := svc.directRead(ctx, "r-1", 0, len(want)-1, wantTail.StreamSeq); ok {
		t.Fatal("direct read accepted fewer events than the tail")
	}
}
