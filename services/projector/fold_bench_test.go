package projector

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// BenchmarkFold times the fold loop alone (no NATS): the messages of a
// fleet of 1,000 sessions, read beforehand as the consumer's goroutine
// reads them, folded and committed in batches of the default size into a
// fresh store. fold-ns/event is the loop's wall time, cpu-ns/event the
// process CPU time (Pebble's background work included).
func BenchmarkFold(b *testing.B) {
	const events = 200_000
	batch, batchBytes := DefaultMaxBatchEvents, DefaultMaxBatchBytes
	if n, _ := strconv.Atoi(os.Getenv("FOLD_BATCH")); n > 0 {
		batch, batchBytes = n, 1<<30
	}
	// FOLD_SESSIONS: fewer sessions, longer ones (what a per-event cost
	// that grows with a session's length shows in).
	sessions := 1000
	if n, _ := strconv.Atoi(os.Getenv("FOLD_SESSIONS")); n > 0 {
		sessions = n
	}
	fleet := loadgen.NewFleet("bench", sessions, 42, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	msgs := make([]msg, events)
	for i := range msgs {
		e := fleet.Next()
		// The subject, seq header and body the fold reads, as the writer
		// stores them.
		msgs[i] = storedMsg(b, &e, uint64(i+1))
		msgs[i].pending = uint64(events - i - 1)
		msgs[i].prepare()
	}
	ctx := context.Background()
	var wall, cpu time.Duration
	for b.Loop() {
		db, err := store.Open(b.TempDir(), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		met, err := newMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		f := newFolder(db, nil, met, DefaultCacheSessions, DefaultSnapshotEvery, []store.StreamPos{{Name: logstore.StreamName}})
		c0, t0 := procstat.CPU(), time.Now()
		for i := range msgs {
			if err := f.handle(ctx, &msgs[i]); err != nil {
				b.Fatal(err)
			}
			if f.events >= batch || f.bytes >= batchBytes || i == len(msgs)-1 {
				if err := f.flush(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := f.landed(); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		cpu += procstat.CPU() - c0
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(wall.Nanoseconds())/float64(b.N*events), "fold-ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*events), "cpu-ns/event")
}
