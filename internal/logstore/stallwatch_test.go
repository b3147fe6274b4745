package logstore

import (
	"context"
	"testing"
	"time"
)

// BenchmarkStallWatch is what bounding one wait of a read costs: a
// context.WithTimeout per wait (what the read did) against the read's one
// stallWatch. A read pays it on every message.
func BenchmarkStallWatch(b *testing.B) {
	ctx := context.Background()
	b.Run("timeout-per-wait", func(b *testing.B) {
		for range b.N {
			nctx, cancel := context.WithTimeout(ctx, time.Minute)
			_ = nctx.Done()
			cancel()
		}
	})
	b.Run("watch", func(b *testing.B) {
		w := newStallWatch(ctx, time.Minute)
		defer w.stop()
		for range b.N {
			w.waiting()
			_ = w.ctx.Done()
		}
	})
}

// The watch cancels its context when the wait under way began the stall
// bound ago or more, and only then (the timer's check is called here at
// chosen moments; TestReadStalledGivesUp runs it in a read).
func TestStallWatch(t *testing.T) {
	w := newStallWatch(context.Background(), time.Hour)
	defer w.stop()
	w.waiting()
	w.check()
	if w.ctx.Err() != nil || w.stalled() {
		t.Fatal("a wait that just began was cancelled")
	}
	w.since.Store(int64(time.Since(w.start) - w.stall))
	w.check()
	if w.ctx.Err() == nil || !w.stalled() {
		t.Fatalf("a wait of the whole bound was not cancelled as stalled (cause %v)", context.Cause(w.ctx))
	}
}
