package formats_test

import (
	"errors"
	"io"
	"iter"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// heapPeak samples the live heap (runtime/metrics /gc/heap/live:bytes, the
// heap marked live at the end of the last GC) while it runs, and on every
// write of its writer; max is the highest sample.
type heapPeak struct {
	mu      sync.Mutex
	max     uint64
	samples []metrics.Sample
	stop    chan struct{}
	done    chan struct{}
	written int64
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			select {
			case <-h.stop:
				return
			case <-time.After(time.Millisecond):
				h.sample()
			}
		}
	}()
	return h
}

func (h *heapPeak) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	metrics.Read(h.samples)
	h.max = max(h.max, h.samples[0].Value.Uint64())
}

// Write counts and drops what the export writes.
func (h *heapPeak) Write(b []byte) (int, error) {
	h.sample()
	h.written += int64(len(b))
	return len(b), nil
}

func (h *heapPeak) end() uint64 {
	runtime.GC() // what the export left live at its end counts too
	close(h.stop)
	<-h.done
	h.sample()
	return h.max
}

// chatEvents is the number of events of the session TestExportHeapBound
// exports: SESSIONLOG_EXPORT_EVENTS, else 100,000.
func chatEvents(t testing.TB) int {
	if s := os.Getenv("SESSIONLOG_EXPORT_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 100_000
}

// exportChat exports the events of chat to f as the projector and
// sessionlog export --to do, reading them as they are made, each read
// from the start (chat holds none).
// It returns the live heap right after NewExport's read (the fold and
// what NewExport keeps).
func exportChat(t *testing.T, f agentlog.Format, chat iter.Seq[schema.Envelope], w io.Writer) (prepared uint64) {
	events := func(after uint64, fn func(*schema.Envelope) error) error {
		for e := range chat {
			if e.Seq <= after {
				continue
			}
			if err := fn(&e); err != nil {
				if errors.Is(err, agentlog.ErrStop) {
					return nil
				}
				return err
			}
		}
		return nil
	}
	x, err := agentlog.NewExport(f.Name(), events)
	if err != nil {
		t.Fatal(err)
	}
	prepared = liveHeap()
	if err := f.Export(w, x); err != nil {
		t.Fatal(err)
	}
	return prepared
}

// liveHeap is the live heap after a GC.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestExportHeapBound exports a chat session of 100,000 events
// (SESSIONLOG_EXPORT_EVENTS=1000000 for a million) made as the answers
// benchmark makes it (230 bytes an event, Claude Code's agent) to every
// format, reading it as it is made, and bounds the peak live heap of each
// export: built whole, a Claude Code export of a million events peaked at
// 586.8 MiB; streamed, at 13.0 MiB, most of it the writer's fold of the
// session (a map slot for each ended turn and tool call); with a reader's
// fold (session.NewReader), at 4.4 MiB, of which the export holds 0.1 MiB
// (BenchmarkExportHeld).
func TestExportHeapBound(t *testing.T) {
	const bound = 16 << 20 // at 100,000 events
	n := chatEvents(t)
	chat := gen.Chat("big", max(n/8, 1), 230, false, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, f := range all {
		t.Run(f.Name(), func(t *testing.T) {
			base := liveHeap()
			h := startHeapPeak()
			start := time.Now()
			prepared := exportChat(t, f, chat, h)
			peak := h.end()
			t.Logf("%s export of %d events: %.1f MiB written in %s, peak live heap %.1f MiB (%.1f MiB before, %.1f MiB after NewExport)",
				f.Name(), n, float64(h.written)/(1<<20), time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20),
				float64(base)/(1<<20), float64(prepared)/(1<<20))
			if n <= 100_000 && peak > bound {
				t.Errorf("peak live heap %.1f MiB, over %d MiB", float64(peak)/(1<<20), bound>>20)
			}
		})
	}
}

// BenchmarkExportHeld exports the chat session of TestExportHeapBound
// (SESSIONLOG_EXPORT_EVENTS events, else 100,000) to each format and
// reports what the export holds as it writes: held-MiB is the highest
// live heap, after a collection at every 10,000th event of its reads
// after NewExport's, over the live heap before it began (the fold, what
// NewExport keeps and the exporter's state, without what a collection
// frees); peak-live-MiB the highest live heap sampled as it runs.
func BenchmarkExportHeld(b *testing.B) {
	n := chatEvents(b)
	chat := gen.Chat("big", max(n/8, 1), 230, false, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, f := range all {
		b.Run(f.Name(), func(b *testing.B) {
			var held, peak uint64
			for b.Loop() {
				base := liveHeap()
				reads := 0
				events := func(after uint64, fn func(*schema.Envelope) error) error {
					reads++
					for e := range chat {
						if e.Seq <= after {
							continue
						}
						if reads > 1 && e.Seq%10_000 == 0 {
							l := liveHeap()
							held = max(held, l-min(base, l))
						}
						if err := fn(&e); err != nil {
							if errors.Is(err, agentlog.ErrStop) {
								return nil
							}
							return err
						}
					}
					return nil
				}
				h := startHeapPeak()
				x, err := agentlog.NewExport(f.Name(), events)
				if err != nil {
					b.Fatal(err)
				}
				if err := f.Export(h, x); err != nil {
					b.Fatal(err)
				}
				p := h.end()
				peak = max(peak, p-min(base, p))
			}
			b.ReportMetric(float64(held)/(1<<20), "held-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-live-MiB")
		})
	}
}
