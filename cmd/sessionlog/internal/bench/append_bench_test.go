package bench

import (
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/client"
)

// BenchmarkClient1 and BenchmarkWriter1 are client-1 and writer-1 of
// `bench append` for one session, one append at a time: the whole
// process's cost of an event (server, writer and load), to count in
// instructions.
func BenchmarkClient1(b *testing.B) {
	benchAppendOne(b, func(ctx context.Context, t *appendTarget, sid string, seq uint64) error {
		_, err := t.cl.Append(ctx, client.AppendRequest{SessionID: sid, ExpectedSeq: client.Seq(seq - 1), Events: benchEvents(1)})
		return err
	})
}

func BenchmarkWriter1(b *testing.B) {
	benchAppendOne(b, func(ctx context.Context, t *appendTarget, sid string, seq uint64) error {
		return writerRequest(ctx, t.nc, sid, seq, 1)
	})
}

func benchAppendOne(b *testing.B, run func(context.Context, *appendTarget, string, uint64) error) {
	ctx := context.Background()
	const sid = "bench-one"
	t := oneSession(b, sid)
	seq := uint64(2)
	b.ResetTimer()
	for range b.N {
		if err := run(ctx, t, sid, seq); err != nil {
			b.Fatal(err)
		}
		seq++
	}
}
