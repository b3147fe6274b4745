package logstore_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A stream takes at most 1000 consumers by default, and an ordered
// consumer stays on the server after Stop until its inactive threshold.
// Reads of long sessions must not use them up (found by the e2e fault
// suite: after a few minutes every fold failed with err 10026).
func TestReadSessionReleasesConsumers(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "long", Events: events("long", 1, 20, "e")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1100; i++ {
		evs, _, err := st.ReadEvents(ctx, "long", 0)
		if err != nil || len(evs) != 20 {
			t.Fatalf("read %d: %d events, %v", i, len(evs), err)
		}
	}
}

// A read's consumer pulls ahead of a slow reader by bytes, not only by
// count: 300 events of 200 KiB (60 MiB) read by a reader that holds still
// at the second leave about the prefetch bound (8 MiB of messages, some
// 20 MiB of heap with nats.go's copies) on the heap, not the whole session
// (85 MiB of heap in a run with a bound of 1000 messages alone).
func TestReadSessionPrefetchBoundedInBytes(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	pad := strings.Repeat("x", 200<<10)
	evs := events("big", 1, 300, "b")
	for i := 1; i < len(evs); i++ {
		evs[i].Data = []byte(`{"content":"` + pad + `"}`)
	}
	var expected uint64
	for i := 0; i < len(evs); i += 20 {
		res, err := st.Append(ctx, logstore.AppendRequest{SessionID: "big", ExpectedStreamSeq: expected, Events: evs[i : i+20]})
		if err != nil {
			t.Fatal(err)
		}
		expected = res.StreamSeq
	}
	evs, pad = nil, ""
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	var peak uint64
	n := 0
	if _, err := st.ReadSession(ctx, "big", 0, func(m *logstore.Msg) error {
		n++
		if n == 2 {
			// The reader holds still while the consumer delivers what it
			// pulled: sample the heap until it stops growing.
			for i, last := 0, uint64(0); i < 40; i++ {
				h := heap()
				peak = max(peak, h)
				if i > 10 && h <= last {
					break
				}
				last = h
				time.Sleep(50 * time.Millisecond)
			}
		}
		return nil
	}); err != nil || n != 300 {
		t.Fatalf("read %d events: %v", n, err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("heap grew %d KiB while the reader held still (bound 8 MiB)", grew>>10)
	if grew > 40<<20 {
		t.Fatalf("the read held %d MiB of heap ahead of its reader, want about the 8 MiB bound", grew>>20)
	}
}
