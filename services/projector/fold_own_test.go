package projector

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// TestFoldOwnsIDs: the ids of a canonical body are views of the message's
// buffer when decoded (DecodeCanonicalViewOf); what the fold applies and
// shows its observer are strings of their own, none a view of any
// message, and the events of one turn share one copy of the turn's id.
func TestFoldOwnsIDs(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := newFolder(db, nil, met, DefaultConfig().CacheSessions, DefaultConfig().SnapshotEvery, []store.StreamPos{{Name: logstore.StreamName}})
	fleet := gen.NewFleet("own", 4, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	msgs := make([]msg, 600)
	for i := range msgs {
		e := fleet.Next()
		msgs[i] = storedMsg(t, &e, uint64(i+1))
	}
	inMsg := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		for i := range msgs {
			start := uintptr(unsafe.Pointer(unsafe.SliceData(msgs[i].data)))
			if p >= start && p < start+uintptr(len(msgs[i].data)) {
				return true
			}
		}
		return false
	}
	type turnOf struct{ session, turn string }
	turnCopies := map[turnOf]map[*byte]bool{}
	folded, shared := 0, 0
	f.observe = func(ev *schema.Envelope, _ uint64) {
		folded++
		for _, s := range []string{ev.EventID, ev.TurnID, ev.StepID, ev.AttemptID, ev.ToolCallID} {
			if s != "" && inMsg(s) {
				t.Fatalf("seq %d of %s: %q is a view of a message's buffer", ev.Seq, ev.SessionID, s)
			}
		}
		if ev.TurnID != "" {
			k := turnOf{ev.SessionID, ev.TurnID}
			if turnCopies[k] == nil {
				turnCopies[k] = map[*byte]bool{}
			} else {
				shared++
			}
			turnCopies[k][unsafe.StringData(ev.TurnID)] = true
		}
	}
	for i := range msgs {
		if err := f.handle(context.Background(), &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, f)
	if folded != len(msgs) || shared == 0 {
		t.Fatalf("%d events folded of %d, %d named a turn named before: want all, and some", folded, len(msgs), shared)
	}
	for k, copies := range turnCopies {
		if len(copies) != 1 {
			t.Fatalf("turn %s of %s: %d copies of its id, want 1", k.turn, k.session, len(copies))
		}
	}
	for id, en := range f.cache {
		if en.st == nil {
			t.Fatalf("session %s stopped: %+v", id, en.sum.Problem)
		}
		if inMsg(en.st.LastEventID) || en.st.Turn != nil && inMsg(en.st.Turn.ID) {
			t.Fatalf("session %s keeps a view of a message's buffer", id)
		}
	}
}
