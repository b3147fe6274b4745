package source_test

import (
	"context"
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/source"
)

// A source append without mapping state kept maps the stored transcript
// again holding none of its events: it reads them a page at a time, each
// line once into the file it maps. A transcript of 400 entries of 48 KiB
// (37.6 MiB stored: each line and the message it maps to) is mapped again
// for one more entry; what the append holds at its peak (the live heap
// allocated under this package's frames: not the writer's and the
// server's, which run in this process too) stays under 8 MiB, whatever
// the transcript's length: 4.2 MiB, most of it the sink's last events
// before the stored tail, kept whole (at most 64 and 4 MiB). Read whole
// (the events held, their lines copied, then the file built in memory)
// it held 52 to 62 MiB.
func TestSourceRemapHoldsNoEvents(t *testing.T) {
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 4 << 10
	t.Cleanup(func() { runtime.MemProfileRate = rate })
	e := newEnv(t, envOpts{source: source.Config{SourceStates: -1}})
	ctx := context.Background()
	const sid = "99999999-9999-4999-8999-999999999999"
	key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid}
	entry := func(i int) json.RawMessage { return userEntry(sid, "r", i, 48<<10) }
	const n = 400
	var first []json.RawMessage
	for i := range n {
		first = append(first, entry(i))
	}
	if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: first}); err != nil {
		t.Fatal(err)
	}
	first = nil
	var size int
	for _, ev := range stored(t, e.st, "cc-"+sid) {
		size += len(ev.Envelope.Data)
	}
	runtime.GC()
	runtime.GC()
	h := sampleHeld()
	rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{entry(n)}})
	held := h.stop()
	if err != nil || rep.Appended == 0 {
		t.Fatalf("append after the transcript: %+v %v", rep, err)
	}
	t.Logf("mapping again a transcript of %d entries (%.1f MiB stored), the append held at most %.1f MiB", n, float64(size)/(1<<20), held/(1<<20))
	if held > 8<<20 {
		t.Errorf("the append held %.1f MiB, over 8 MiB", held/(1<<20))
	}
}

// heldSampler keeps the most the live heap held of what this package's
// frames allocated (heldHere) while it runs.
type heldSampler struct {
	max  float64
	done chan struct{}
	wg   sync.WaitGroup
}

func sampleHeld() *heldSampler {
	h := &heldSampler{done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		here := map[[32]uintptr]bool{}
		for {
			h.max = max(h.max, heldHere(here))
			select {
			case <-h.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return h
}

// stop ends the sampling and returns the most held.
func (h *heldSampler) stop() float64 {
	runtime.GC() // what the append left live counts too
	close(h.done)
	h.wg.Wait()
	return h.max
}

// heldHere is the live heap, as the last collection marked it, that a
// call of this package allocated, from the memory profile, each record
// scaled by its sampling as pprof scales it. here caches which stacks
// hold a frame of this package.
func heldHere(here map[[32]uintptr]bool) float64 {
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, true)
	rate := float64(runtime.MemProfileRate)
	var sum float64
	for _, r := range recs[:n] {
		objs, bytes := r.InUseObjects(), r.InUseBytes()
		if objs <= 0 {
			continue
		}
		in, ok := here[r.Stack0]
		if !ok {
			frames := runtime.CallersFrames(r.Stack())
			for {
				f, more := frames.Next()
				if strings.HasPrefix(f.Function, "github.com/sessionlog/sessionlog/services/source.") {
					in = true
					break
				}
				if !more {
					break
				}
			}
			here[r.Stack0] = in
		}
		if in {
			avg := float64(bytes) / float64(objs)
			sum += float64(bytes) / (1 - math.Exp(-avg/rate))
		}
	}
	return sum
}
