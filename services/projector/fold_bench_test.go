package projector

import (
	"context"
	"iter"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// BenchmarkFold times the fold loop alone (no NATS): the messages of a
// fleet of 1,000 sessions, read beforehand as the consumer's goroutine
// reads them, folded and committed in batches of the default size into a
// fresh store. fold-ns/event is the loop's wall time, cpu-ns/event the
// process CPU time (Pebble's background work included).
//
// FOLD_EVENTS sets the number of events (default 200,000): a reduced run
// for counting instructions (valgrind --tool=callgrind, GOGC=off, the
// difference between -test.benchtime 1x and 11x is ten folds). Count with
// GOMAXPROCS=1 and GODEBUG=asyncpreemptoff=1: with two Ps the idle P's
// spinning in the scheduler is counted too, by chance (1.2 billion
// instructions more than with one P in a run of 1x, about none in one of
// 6x), so the difference came out at 14,752 instructions per event where
// one P counts 26,798 (and valgrind stops on the preemption signal of
// some runs).
func BenchmarkFold(b *testing.B) { benchFold(b, false) }

// BenchmarkFoldPrepare is BenchmarkFold with the consumer goroutine's
// share counted too (msg.prepare: the subject and the decoding of the
// body), which a catch-up's CPU per event includes.
func BenchmarkFoldPrepare(b *testing.B) { benchFold(b, true) }

func benchFold(b *testing.B, prepare bool) {
	events := 200_000
	if n, _ := strconv.Atoi(os.Getenv("FOLD_EVENTS")); n > 0 {
		events = n
	}
	batch, batchBytes := DefaultConfig().MaxBatchEvents, DefaultConfig().MaxBatchBytes
	if n, _ := strconv.Atoi(os.Getenv("FOLD_BATCH")); n > 0 {
		batch, batchBytes = n, 1<<30
	}
	// FOLD_SESSIONS: fewer sessions, longer ones (what a per-event cost
	// that grows with a session's length shows in).
	sessions := 1000
	if n, _ := strconv.Atoi(os.Getenv("FOLD_SESSIONS")); n > 0 {
		sessions = n
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet := gen.NewFleet("bench", sessions, 42, t0)
	next := fleet.Next
	// FOLD_CHAT: the sessions are gen.Chat's, in events of about this
	// many bytes (texts with characters JSON escapes), in turn.
	if n, _ := strconv.Atoi(os.Getenv("FOLD_CHAT")); n > 0 {
		pulls := make([]func() (schema.Envelope, bool), sessions)
		for i := range pulls {
			pull, stop := iter.Pull(gen.Chat("chat-"+strconv.Itoa(i), events/sessions/8+2, n, false, t0))
			defer stop()
			pulls[i] = pull
		}
		k := 0
		next = func() schema.Envelope {
			e, _ := pulls[k%sessions]()
			k++
			return e
		}
	}
	stored := make([]msg, events)
	for i := range stored {
		e := next()
		// The subject, seq header and body the fold reads, as the writer
		// stores them.
		stored[i] = storedMsg(b, &e, uint64(i+1))
		stored[i].pending = uint64(events - i - 1)
		if !prepare {
			stored[i].prepare()
		}
	}
	msgs := make([]msg, events)
	ctx := context.Background()
	var wall, cpu time.Duration
	ops := 0
	for b.Loop() {
		copy(msgs, stored)
		db, err := store.Open(b.TempDir(), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		met, err := newMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		f := newFolder(db, nil, met, DefaultConfig().CacheSessions, DefaultConfig().SnapshotEvery, []store.StreamPos{{Name: logstore.StreamName}})
		c0, t0 := procstat.CPU(), time.Now()
		for i := range msgs {
			if prepare {
				msgs[i].prepare()
			}
			if err := f.handle(ctx, &msgs[i]); err != nil {
				b.Fatal(err)
			}
			if f.events >= batch || f.bytes >= batchBytes || i == len(msgs)-1 {
				ops += f.batch.Ops()
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
	// The keys the events wrote (the event index, the search index), the
	// summaries and snapshots of a flush not counted.
	b.ReportMetric(float64(ops)/float64(b.N*events), "keys/event")
}
