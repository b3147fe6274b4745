package repairer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// bodyBytes is the size of the stored bodies of the sessions' events.
func (e *env) bodyBytes(ids ...string) int64 {
	e.t.Helper()
	ctx := context.Background()
	var n int64
	for _, id := range ids {
		tail, err := e.store.Tail(ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		bodies, err := e.store.ReadBatch(ctx, id, tail, 0, int(tail.Seq), 0)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, b := range bodies {
			n += int64(len(b))
		}
	}
	return n
}

// The repairer's events count in their tenant's stored bytes like the
// writer's, and a repair is never refused over the tenant's bounds: the
// tenant here is past both, and its sessions left open by a dead holder
// (repaired in a burst, grouped or alone) and one asked for on demand
// are closed and counted.
func TestRepairCountedInTenantUsage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.store.PutUsageLimits(ctx, logstore.TenantLimits{Sessions: 1, Bytes: 1}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("_Tacme_r-%d", i)
		ids = append(ids, id)
		e.appendEvents(id, evCreated, evTurn, evRequested, evStarted)
	}
	before := logstore.TenantUsage{Sessions: int64(len(ids)), Bytes: e.bodyBytes(ids...)}
	if _, _, err := e.store.AddUsage(ctx, "acme", before, nil); err != nil {
		t.Fatal(err)
	}
	r := e.start(Config{Grace: testGrace})
	for _, id := range ids[1:] {
		e.claim(id, "agent-1")
	}
	if reply, hdr := e.request(`{"sessionId":"` + ids[0] + `"}`); reply["repaired"] != true || hdr != "" {
		t.Fatalf("on demand: %v (error header %q)", reply, hdr)
	}
	natstest.CheckFor(t, liveness, 20*time.Millisecond, func() error {
		for _, id := range ids {
			if !e.fold(id).Paused {
				return fmt.Errorf("%s not repaired yet", id)
			}
		}
		return nil
	})
	// Stopped, the repairer has added what it counted.
	r.stop()
	want := logstore.TenantUsage{Sessions: int64(len(ids)), Bytes: e.bodyBytes(ids...)}
	if want.Bytes <= before.Bytes {
		t.Fatalf("repairs stored %d bytes", want.Bytes-before.Bytes)
	}
	if got, err := e.store.UsageOf(ctx, "acme"); err != nil || got != want {
		t.Fatalf("usage after the repairs %+v (%v), want %+v (%d bytes before them)", got, err, want, before.Bytes)
	}
}
