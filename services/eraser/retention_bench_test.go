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
	"strings"
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
// pays. Its memory must stay flat in the number of sessions
// (RETENTION_SESSIONS, default 2,000; the closing note's figures are at
// 2,000, 10,000 and 100,000). nats-server runs in a process of its own
// (RETENTION_SERVER=embedded runs it in this one, as `sessionlog up` does),
// so that what this process holds is the eraser's, not the server's
// block buffers. It reports, for the sweep:
//   - peak-live-above-MiB: the live heap's peak (as each garbage
//     collection found it, collections run at GOGC 20 meanwhile) above
//     the live heap before it;
//   - rss-peak-above-MiB: this process's resident set's peak (VmHWM,
//     reset before the sweep) above its resident set before it (memory
//     returned to the system first);
//   - server-rss-peak-above-MiB: the same of the server's process (0
//     when embedded: it is this process's then);
//   - B-allocated/session: what the sweep allocated per session.
func BenchmarkRetentionWalk(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("RETENTION_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	var url string
	server := 0 // the server's process id, when it has its own
	if os.Getenv("RETENTION_SERVER") == "embedded" {
		url = natstest.RunServerDir(b, b.TempDir()).ClientURL()
	} else {
		p := natstest.RunProcess(b, b.TempDir())
		url, server = p.URL, p.Pid
	}
	ctx := context.Background()
	now := time.Now().UTC()
	fillClosed(b, ctx, url, n, now)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(Config{Store: st, Conn: nc, RetainClosed: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var peak, base, allocated, rss, rssBase, serverRSS uint64
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	for range b.N {
		debug.FreeOSMemory() // collects first
		base = liveHeap()
		self := resetPeakRSS(b, "self")
		rssBase = self
		var srv0 uint64
		if server != 0 {
			srv0 = resetPeakRSS(b, strconv.Itoa(server))
		}
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
		peak = max(peak, above(top.Load(), base))
		rss = max(rss, above(procStatus(b, "self", "VmHWM"), self))
		if server != 0 {
			serverRSS = max(serverRSS, above(procStatus(b, strconv.Itoa(server), "VmHWM"), srv0))
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-live-above-MiB")
	b.ReportMetric(float64(base)/(1<<20), "live-before-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "rss-peak-above-MiB")
	b.ReportMetric(float64(rssBase)/(1<<20), "rss-before-MiB")
	b.ReportMetric(float64(serverRSS)/(1<<20), "server-rss-peak-above-MiB")
	b.ReportMetric(float64(allocated)/float64(b.N)/float64(n), "B-allocated/session")
	b.ReportMetric(float64(n), "sessions")
}

// fillClosed stores n closed sessions (closedFleet) through a connection
// and a store of their own, closed once they are stored: the sweep's
// process holds nothing of the filling.
func fillClosed(b *testing.B, ctx context.Context, url string, n int, t time.Time) {
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.PublishUnchecked(ctx, closedFleet(n, t)); err != nil {
		b.Fatal(err)
	}
}

// above is how far x is above y, 0 if it is not (the kernel's resident
// set counters are per-CPU sums, read a little apart).
func above(x, y uint64) uint64 { return x - min(x, y) }

// resetPeakRSS resets the peak resident set (VmHWM) of process pid
// ("self" for this one) to its resident set, and returns that.
func resetPeakRSS(b *testing.B, pid string) uint64 {
	if err := os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak resident set: %v", err)
	}
	return procStatus(b, pid, "VmRSS")
}

// procStatus is a field of /proc/<pid>/status given in kB, in bytes.
func procStatus(b *testing.B, pid, field string) uint64 {
	f, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.Lines(string(f)) {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s of %s: %v", field, pid, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%s/status", field, pid)
	return 0
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
