package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ScaleOptions configures the scale benchmark.
type ScaleOptions struct {
	Out io.Writer
	// Sessions written in all (each EventsPerSession single-event
	// appends), and the window measured at each end.
	Sessions, Window, EventsPerSession int
	// Concurrency: sessions written at once.
	Concurrency int
	Partitions  int
}

// Scale writes Sessions sessions through the writer on one embedded node,
// in order, and compares the cost of an append in the first Window
// sessions against the last Window: whether an append costs more once
// many sessions exist. CPU is this process's (server, writer and load
// generator together: the writer runs in-process, as in `sessionlog up`);
// the peak RSS likewise.
func Scale(ctx context.Context, opt ScaleOptions) error {
	srv, shutdown, err := embeddedServer("sessionlog-bench-scale-")
	if err != nil {
		return err
	}
	defer shutdown()
	st, stop, err := startWriter(ctx, srv, false, logstore.Config{Partitions: opt.Partitions})
	if err != nil {
		return err
	}
	defer stop()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	cl := client.New(nc)
	write := func(ctx context.Context, i int, lats []time.Duration) ([]time.Duration, error) {
		sid := fmt.Sprintf("scale-%07d", i)
		t0 := time.Now()
		if _, err := cl.Append(ctx, client.AppendRequest{SessionID: sid, ExpectedSeq: client.Seq(0), Events: []schema.Envelope{{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)}}}); err != nil {
			return lats, err
		}
		lats = append(lats, time.Since(t0))
		for seq := uint64(2); seq <= uint64(opt.EventsPerSession); seq++ {
			t0 := time.Now()
			if err := writerRequest(ctx, nc, sid, seq, 1); err != nil {
				return lats, err
			}
			lats = append(lats, time.Since(t0))
		}
		return lats, nil
	}
	// phase writes sessions [from, to) with Concurrency workers and
	// returns the CPU per event and every append's latency.
	phase := func(from, to int) (cpuPerEvent time.Duration, lats []time.Duration, err error) {
		var (
			next atomic.Int64
			mu   sync.Mutex
			wg   sync.WaitGroup
			werr error
		)
		next.Store(int64(from))
		cpu0 := procstat.CPU()
		for range opt.Concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for {
					i := int(next.Add(1) - 1)
					if i >= to {
						break
					}
					var err error
					if mine, err = write(ctx, i, mine); err != nil {
						mu.Lock()
						werr = err
						mu.Unlock()
						break
					}
				}
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if werr != nil {
			return 0, nil, werr
		}
		cpu := procstat.CPU() - cpu0
		return cpu / time.Duration(max(len(lats), 1)), lats, nil
	}
	firstCPU, firstLats, err := phase(0, opt.Window)
	if err != nil {
		return err
	}
	if _, _, err := phase(opt.Window, opt.Sessions-opt.Window); err != nil {
		return err
	}
	lastCPU, lastLats, err := phase(opt.Sessions-opt.Window, opt.Sessions)
	if err != nil {
		return err
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	fmt.Fprintf(opt.Out, "BENCH name=scale-flat value=%.1f unit=us baseline=%.1f ratio=%.2f sessions=%d window=%d events_per_session=%d partitions=%d\n",
		us(lastCPU), us(firstCPU), us(lastCPU)/us(firstCPU), opt.Sessions, opt.Window, opt.EventsPerSession, st.Layout().Partitions())
	p99First, p99Last := p99(firstLats), p99(lastLats)
	fmt.Fprintf(opt.Out, "BENCH name=scale-flat-p99 value=%.0f unit=us baseline=%.0f ratio=%.2f\n", us(p99Last), us(p99First), us(p99Last)/us(p99First))
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		// Linux reports ru_maxrss in KiB.
		fmt.Fprintf(opt.Out, "BENCH name=scale-rss-writer value=%.0f unit=MiB note=peak-rss-of-one-process-server+writer+load\n", float64(ru.Maxrss)/1024)
	}
	return nil
}

func p99(lats []time.Duration) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	slices.Sort(lats)
	return lats[len(lats)*99/100]
}

// embeddedServer starts a JetStream server in a temporary directory;
// shutdown stops it and removes the directory.
func embeddedServer(prefix string) (*server.Server, func(), error) {
	dir, cleanup, err := natstest.TempDir(prefix)
	if err != nil {
		return nil, nil, err
	}
	srv, err := natstest.Start(natstest.Options(dir))
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return srv, func() { srv.Shutdown(); srv.WaitForShutdown(); cleanup() }, nil
}
