package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BatchFloor is `bench append`'s raw batch floor measured for an import:
// events in atomic batches of batch events, straight to JetStream, over
// sessions of perSession events, jobs sessions at a time (as the importer
// sends them). It returns events per second.
func BatchFloor(ctx context.Context, url string, batch, events, perSession, jobs int) (float64, error) {
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
	sessions := (events + perSession - 1) / perSession
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	start := time.Now()
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s := int(next.Add(1)) - 1
				if s >= sessions {
					return
				}
				sid := fmt.Sprintf("floor-%d", s)
				total := min(perSession, events-s*perSession)
				var seq uint64 = 1
				for n := 0; n < total; {
					k := min(batch, total-n)
					if err := rawBatch(ctx, js, seqs, sid, seq, k); err != nil {
						errs <- err
						return
					}
					seq += uint64(k)
					n += k
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return float64(events) / took.Seconds(), nil
}
