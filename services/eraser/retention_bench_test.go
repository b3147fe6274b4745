package eraser

import (
	"context"
	"fmt"
	"iter"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// BenchmarkRetentionWalk is one retention sweep over a fleet of closed
// sessions none of which is old enough to erase: the walk every sweep
// pays. It reports the live heap's peak during the sweep (as each garbage
// collection found it, collections run at GOGC 20 meanwhile) above the
// live heap before it, the embedded server's included, which must stay
// flat in the number of sessions (RETENTION_SESSIONS, default 2,000; the
// closing note's figures are at 10,000 and 100,000), and what the sweep
// allocated per session.
func BenchmarkRetentionWalk(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("RETENTION_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	srv := natstest.RunServerDir(b, b.TempDir())
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.PublishUnchecked(ctx, closedFleet(n, now)); err != nil {
		b.Fatal(err)
	}
	svc, err := New(Config{Store: st, Conn: nc, RetainClosed: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var peak, base, allocated uint64
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	for range b.N {
		runtime.GC()
		base = liveHeap()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var top atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				if h := liveHeap(); h > top.Load() {
					top.Store(h)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		erased, err := svc.Retain(ctx)
		close(stop)
		<-sampled
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		allocated += after.TotalAlloc - before.TotalAlloc
		if err != nil || erased != 0 {
			b.Fatalf("retention erased %d: %v", erased, err)
		}
		peak = max(peak, top.Load()-min(top.Load(), base))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-live-above-MiB")
	b.ReportMetric(float64(base)/(1<<20), "live-before-MiB")
	b.ReportMetric(float64(allocated)/float64(b.N)/float64(n), "B-allocated/session")
	b.ReportMetric(float64(n), "sessions")
}

// liveHeap is the heap the last garbage collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// closedFleet is n sessions of two events each, created and closed at t.
func closedFleet(n int, t time.Time) iter.Seq[schema.Envelope] {
	return func(yield func(schema.Envelope) bool) {
		for i := range n {
			id := fmt.Sprintf("r-%07d", i)
			for seq, typ := range []string{schema.TypeSessionCreated, schema.TypeSessionClosed} {
				e := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: uint64(seq + 1),
					EventID: fmt.Sprintf("%s-%d", id, seq+1), Time: t, Type: typ}
				if typ == schema.TypeSessionClosed {
					e.Data = []byte(`{"reason":"done"}`)
				}
				if !yield(e) {
					return
				}
			}
		}
	}
}
