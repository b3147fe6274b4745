package projector

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
)

// BenchmarkContextReads times what the event index reads of one session
// of gen.Chat's (200 turns, rewinds among them) cost the HTTP side, a
// snapshot taken per operation as per request: Context is /context's
// head (the summary, the last compaction, the ranges rewinds abandoned)
// and then its pages, of 16 KiB, to the end; Events
// is where a page of /events after seq n starts (startAt), for n from 1
// on by tens. entries/op is what Context served.
func BenchmarkContextReads(b *testing.B) {
	f, db := newTestFolder(b, 10)
	ctx := context.Background()
	const id = "chat-bench"
	var last uint64
	ss := uint64(0)
	for e := range gen.Chat(id, 200, 200, true, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		ss++
		m := storedMsg(b, &e, ss)
		if err := f.handle(ctx, &m); err != nil {
			b.Fatal(err)
		}
		last = e.Seq
	}
	commit(b, f)
	s := &Service{db: db}
	const limit = 16 << 10
	b.Run("Context", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n = 0
			err := s.view(func(rd reader) error {
				c, _, err := httpapi.ContextOf(rd.snap, id, limit)
				if c != nil {
					n = len(c.Entries)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "entries/op")
	})
	b.Run("Events", func(b *testing.B) {
		after := uint64(0)
		for b.Loop() {
			after = (after+10)%last + 1
			err := s.view(func(rd reader) error {
				seq, ss, err := rd.snap.LastEvent(id, after)
				if err == nil && (ss == 0 || seq == 0) {
					b.Fatalf("no start for after %d", after)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
