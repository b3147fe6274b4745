package projector

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
)

// BenchmarkSearch times the search index of a fleet of 10,000 sessions
// (200,000 events, two turns each, folded into a fresh store): a page of
// 20 for a word every session holds, for a word few do, and for two words
// no session holds together (the whole driving list is examined up to
// the scan budget). index-bytes/event is what the index adds to the
// store, fold-ns/event the fold with it.
func BenchmarkSearch(b *testing.B) {
	const sessions, events = 10_000, 200_000
	fleet := gen.NewFleet("s", sessions, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Every session cached: no restore reads the (absent) log.
	f, db := newTestFolder(b, sessions+1)
	ctx := context.Background()
	t0 := time.Now()
	for i := range events {
		e := fleet.Next()
		m := storedMsg(b, &e, uint64(i+1))
		if err := f.handle(ctx, &m); err != nil {
			b.Fatal(err)
		}
		if f.events >= DefaultMaxBatchEvents {
			if err := f.flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	commit(b, f)
	fold := time.Since(t0)
	var indexBytes int
	it, _ := db.Iter([]byte("vq"))
	for ok := it.First(); ok; ok = it.Next() {
		indexBytes += len(it.Key()) + len(it.Value())
	}
	it.Close()
	s := &Service{db: db}
	for _, c := range []struct {
		name  string
		terms []string
	}{
		{"CommonWord", []string{"task"}},
		{"RareWord", []string{"s-9999"}},
		{"NoSessionHoldsBoth", []string{"please", "zebra"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := s.view(func(rd reader) error {
					_, _, err := rd.search(c.terms, "", DefaultSearchLimit, nil)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(indexBytes)/events, "index-bytes/event")
			b.ReportMetric(float64(fold.Nanoseconds())/events, "fold-ns/event")
		})
	}
}
