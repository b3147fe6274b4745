package gen_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/sessionfixture"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Every shape folds without error in pkg/session, its events valid as
// the service stores them; an Exact session holds exactly n events and
// its last seq is a safe point.
func TestShapesFold(t *testing.T) {
	for _, n := range []int{1, 2, gen.TurnEvents, 1 + gen.TurnEvents, 100} {
		var evs []schema.Envelope
		if err := gen.Exact("exact", n, func(e schema.Envelope) error { evs = append(evs, e); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(evs) != n {
			t.Fatalf("Exact(%d): %d events", n, len(evs))
		}
		if err := sessionfixture.Check(evs); err != nil {
			t.Fatalf("Exact(%d): %v", n, err)
		}
		safe, err := session.ListSafePoints(evs)
		if err != nil || !slices.Contains(safe, uint64(n)) {
			t.Fatalf("Exact(%d): safe points %v %v", n, safe, err)
		}
	}

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet := gen.NewFleet("f", 3, 1, t0)
	bySession := map[string][]schema.Envelope{}
	for range 500 {
		e := fleet.Next()
		bySession[e.SessionID] = append(bySession[e.SessionID], e)
	}
	for id, evs := range bySession {
		if err := sessionfixture.Check(evs); err != nil {
			t.Errorf("fleet session %s: %v", id, err)
		}
	}

	for _, rewinds := range []bool{false, true} {
		evs := slices.Collect(gen.Chat("chat", 120, 300, rewinds, t0))
		if err := sessionfixture.Check(evs); err != nil {
			t.Errorf("Chat rewinds=%v: %v", rewinds, err)
		}
	}
}
