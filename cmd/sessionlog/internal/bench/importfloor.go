package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BatchFloor is `bench append`'s raw batch floor measured for an import:
// events atomic batches of batch events each, straight to JetStream, one
// after another (as the importer sends them), spread over sessions of
// perSession events. It returns events per second.
func BatchFloor(ctx context.Context, url string, batch, events, perSession int) (float64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	seqs := newStreamSeqs()
	start := time.Now()
	done := 0
	for s := 0; done < events; s++ {
		sid := fmt.Sprintf("floor-%d", s)
		var seq uint64 = 1
		for n := 0; n < perSession && done < events; {
			k := min(batch, perSession-n, events-done)
			if err := rawBatch(ctx, js, seqs, sid, seq, k); err != nil {
				return 0, err
			}
			seq += uint64(k)
			n += k
			done += k
		}
	}
	return float64(done) / time.Since(start).Seconds(), nil
}
