package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// CatchupConfig configures the projector catch-up benchmark.
type CatchupConfig struct {
	Events   int // default 1,000,000
	Sessions int // default 1,000
	// MaxBatchEvents of the projector and of the raw floor (0: the
	// projector's default).
	MaxBatchEvents int
	// Dir holds the server and the stores (default a new temp dir,
	// removed afterwards).
	Dir      string
	Logger   *slog.Logger
	Progress io.Writer
	// CPUProfile, if set, is written during the catch-up.
	Profile func() (stop func())
}

// CatchupResult is what RunCatchup measured.
type CatchupResult struct {
	Events int
	// Catchup is the time from an empty store to caught up with the stream
	// (a full rebuild), and EventsPerSec its rate.
	Catchup      time.Duration
	EventsPerSec float64
	// RawKeysPerSec: the same number of keys (the event index key, the
	// stored event body as value) written to a fresh Pebble store in
	// batches of the same size, no folding, no NATS: the floor.
	RawKeysPerSec  float64
	RawSmallPerSec float64 // the same with 8-byte values
	ViewKeys       int
	PeakRSSBytes   int64 // VmHWM of this process (server, fill and projector)
	HeapAfter      uint64
}

// RunCatchup fills a stream with cfg.Events events over cfg.Sessions
// sessions, then measures the projector catching up from an empty store.
func RunCatchup(ctx context.Context, cfg CatchupConfig) (CatchupResult, error) {
	var res CatchupResult
	if cfg.Events <= 0 {
		cfg.Events = 1_000_000
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = 1000
	}
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = projector.DefaultMaxBatchEvents
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sessionlog-bench-catchup-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	srv, err := natstest.Start(natstest.Options(filepath.Join(dir, "nats")))
	if err != nil {
		return res, err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return res, err
	}
	defer nc.Close()
	ls, err := logstore.Open(ctx, nc, logstore.Config{Logger: cfg.Logger})
	if err != nil {
		return res, err
	}

	say("filling the stream with %d events over %d sessions", cfg.Events, cfg.Sessions)
	start := time.Now()
	fleet := loadgen.NewFleet("bench", cfg.Sessions, 42, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := fleet.Fill(ctx, ls.JetStream(), cfg.Events); err != nil {
		return res, fmt.Errorf("fill: %w", err)
	}
	say("filled in %s", time.Since(start).Round(time.Millisecond))

	// The raw floor: the same events, generated again (same seed), as
	// Pebble keys.
	raw := loadgen.NewFleet("bench", cfg.Sessions, 42, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	keys := make([][]byte, 0, cfg.Events)
	vals := make([][]byte, 0, cfg.Events)
	for range cfg.Events {
		e := raw.Next()
		b, err := schema.Encode(&e)
		if err != nil {
			return res, err
		}
		keys = append(keys, store.EventKey(e.SessionID, e.Seq))
		vals = append(vals, b)
	}
	rawRate := func(name string, small bool) (float64, error) {
		db, err := store.Open(filepath.Join(dir, name), store.Options{})
		if err != nil {
			return 0, err
		}
		defer db.Close()
		small8 := make([]byte, 8)
		t := time.Now()
		for i := 0; i < len(keys); i += cfg.MaxBatchEvents {
			b := db.NewBatch()
			for j := i; j < min(i+cfg.MaxBatchEvents, len(keys)); j++ {
				v := vals[j]
				if small {
					v = small8
				}
				b.SetInternal(keys[j], v)
			}
			if err := b.Commit(store.Checkpoint{}); err != nil {
				return 0, err
			}
		}
		return float64(len(keys)) / time.Since(t).Seconds(), nil
	}
	if res.RawKeysPerSec, err = rawRate("raw", false); err != nil {
		return res, err
	}
	if res.RawSmallPerSec, err = rawRate("raw8", true); err != nil {
		return res, err
	}
	keys, vals = nil, nil
	runtime.GC()
	say("raw floor: %.0f keys/s (event bodies), %.0f keys/s (8-byte values)", res.RawKeysPerSec, res.RawSmallPerSec)

	var stop func()
	if cfg.Profile != nil {
		stop = cfg.Profile()
	}
	start = time.Now()
	p, err := projector.New(projector.Config{Store: ls, DataDir: filepath.Join(dir, "views"), Logger: cfg.Logger, MaxBatchEvents: cfg.MaxBatchEvents})
	if err != nil {
		return res, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	for p.Ready() != nil {
		select {
		case err := <-done:
			cancel()
			return res, fmt.Errorf("projector stopped: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	res.Catchup = time.Since(start)
	if stop != nil {
		stop()
	}
	res.Events = cfg.Events
	res.EventsPerSec = float64(cfg.Events) / res.Catchup.Seconds()
	cancel()
	if err := <-done; err != nil {
		return res, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapAfter = ms.HeapAlloc
	res.PeakRSSBytes = peakRSS()
	say("caught up in %s", res.Catchup.Round(time.Millisecond))
	return res, nil
}

// peakRSS reads VmHWM from /proc/self/status (0 where there is none).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}
