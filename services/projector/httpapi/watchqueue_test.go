package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The byte accounting of watch queues: a watch overflows past its own
// budget or past the hub's total, and every byte comes back.
func TestWatchQueueBudgets(t *testing.T) {
	hub, err := newWatchHub(WatchLimits{QueueBytes: 100, TotalBytes: 150}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ev := func(n int) WatchEvent {
		a := uint64(1)
		return WatchEvent{Transient: true, AfterSeq: &a, Event: json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)}
	}
	a, b := newWatchQueue(hub), newWatchQueue(hub)
	a.push(ev(60))
	a.push(ev(30))
	if a.overflowed() || hub.queued.Load() != 90 {
		t.Fatalf("a: over %v, hub holds %d, want 90", a.overflowed(), hub.queued.Load())
	}
	// The loop takes a's events: their bytes stay counted until released.
	evs, _ := a.take()
	if len(evs) != 2 || hub.queued.Load() != 90 {
		t.Fatalf("took %d, hub holds %d", len(evs), hub.queued.Load())
	}
	a.push(ev(20)) // 110 > a's 100: a overflows; its queued 20 are not kept
	if !a.overflowed() {
		t.Fatal("a did not overflow past its own budget")
	}
	b.push(ev(50))
	if b.overflowed() || hub.queued.Load() != 140 {
		t.Fatalf("b: over %v, hub holds %d, want 140", b.overflowed(), hub.queued.Load())
	}
	b.push(ev(20)) // b holds 70 of its 100, but the hub would hold 160 > 150
	if !b.overflowed() {
		t.Fatal("b did not overflow past the hub's total")
	}
	if hub.queued.Load() != 90 {
		t.Fatalf("after b's overflow the hub holds %d, want a's 90", hub.queued.Load())
	}
	a.release(evs[0])
	a.close()
	b.close()
	if got := hub.queued.Load(); got != 0 {
		t.Fatalf("after close the hub holds %d", got)
	}
}

// A watch limit left zero takes its default; one set stays.
func TestWatchLimitsDefaults(t *testing.T) {
	if got := (WatchLimits{QueueBytes: 100}).WithDefaults(); got.QueueBytes != 100 || got.TotalBytes != 256<<20 {
		t.Errorf("partial watch limits: %+v", got)
	}
}
