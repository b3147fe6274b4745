package writer

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// Memory is bounded by what is active, not by how many sessions exist:
// after many times more sessions than the bound have appended (each
// naming a holder), the state, lease and owed caches hold at most the
// bound; the entry of a session evicted long ago is garbage, its event-id
// index with it; and that session, when it comes back, is folded from the
// log again, its resent event still answered as the duplicate it is.
func TestCachesHoldAtMostTheirBound(t *testing.T) {
	const bound, sessions = 8, 120
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Store: st, Conn: nc, StateCacheSize: bound})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, w.Ready)

	request := func(id string, expected uint64, eventID string) string {
		ev := `{"type":"message/user","data":{"content":"hi"}`
		if expected == 0 {
			ev = `{"type":"session/created"`
		}
		return fmt.Sprintf(`{"sessionId":%q,"expectedSeq":%d,"holder":"agent-1","events":[%s,"eventId":%q}]}`, id, expected, ev, eventID)
	}
	write := func(id string) {
		t.Helper()
		for seq := uint64(1); seq <= 3; seq++ {
			rep, err := w.Append(ctx, []byte(request(id, seq-1, fmt.Sprintf("e%d", seq))))
			if err != nil || rep.LastSeq != seq {
				t.Fatalf("%s seq %d: %+v %v", id, seq, rep, err)
			}
		}
	}

	first := "bound-000"
	write(first)
	e, ok := w.cache.Peek(first)
	if !ok || len(e.ids) != 3 {
		t.Fatalf("%s not cached with its 3 event ids (cached %v)", first, ok)
	}
	firstEntry := weak.Make(e)
	e = nil
	for i := 1; i < sessions; i++ {
		write(fmt.Sprintf("bound-%03d", i))
	}

	for name, n := range map[string]int{"state": w.cache.Len(), "lease": w.leases.Len(), "owed": w.owed.Len()} {
		if n > bound {
			t.Errorf("%s cache holds %d sessions after %d, bound %d", name, n, sessions, bound)
		}
	}
	if w.cache.Contains(first) {
		t.Fatalf("%s still cached after %d newer sessions, bound %d", first, sessions-1, bound)
	}
	runtime.GC()
	if firstEntry.Value() != nil {
		t.Fatalf("the evicted entry of %s (its state and event-id index) is still reachable", first)
	}

	rep, err := w.Append(ctx, []byte(request(first, 1, "e2")))
	if err != nil || !rep.Duplicate || rep.LastSeq != 2 {
		t.Fatalf("resent event of an evicted session: %+v %v, want the duplicate of seq 2", rep, err)
	}
	if e, ok := w.cache.Peek(first); !ok || len(e.ids) != 3 {
		t.Fatalf("%s not folded back with its 3 event ids", first)
	}
}
