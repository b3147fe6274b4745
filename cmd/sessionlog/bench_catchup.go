package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
	"github.com/sessionlog/sessionlog/internal/gcpolicy"
)

// `sessionlog bench catchup [--quick]`: fill a stream with N events over
// 1,000 sessions, then time the projector from an empty store to caught
// up against the floor of consuming the same stream and writing its
// events to Pebble without folding (and of consuming it alone, and of
// writing the keys to Pebble alone). The full run measures a 200,000-event
// catch-up first, for the peak RSS the 1,000,000-event one is held to.
func runBenchCatchup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench catchup")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "200,000 events instead of 1,000,000")
	events := fs.Int("events", 0, "events to fill (default 1,000,000; --quick 200,000)")
	sessions := fs.Int("sessions", 1000, "sessions the events are spread over")
	batch := fs.Int("max-batch-events", 0, "events per Pebble batch (0: the projector's default)")
	dir := fs.String("dir", "", "working directory (default a temporary one, removed afterwards)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the catch-up to this file")
	tracePath := fs.String("trace", "", "write an execution trace of the catch-up to this file (go tool trace: where the fold loop and the consumer wait)")
	memProfile := fs.String("memprofile", "", "write the allocation profile at the catch-up's end to this file, and at its start to this file + \".base\" (go tool pprof -base)")
	dups := fs.Duration("duplicates", time.Second, "the stream's deduplication window during the fill, waited out before the measures (0: the store's default, 2m: the server's message ids stay in this process's heap during the catch-up)")
	verbose := fs.Bool("v", false, "print progress to stderr")
	memLimit := bytesFlag(fs, "memory-limit", defaultProjectorMemoryLimit, "soft limit of the Go heap, a `size` such as 320MiB, and its budget, as the projector command sets them, for this process (the server, the floors and the first catch-up) and the projector process (0: none; GOMEMLIMIT takes precedence)")
	noProcess := fs.Bool("no-process", false, "skip the second catch-up, by a `sessionlog projector` process of its own as deployed, which measures the projector's peak RSS alone (the first runs in this process, beside the server, as the floors do)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	n := *events
	if n <= 0 {
		n = 1_000_000
		if *quick {
			n = 200_000
		}
	}
	gcpolicy.Budget(*memLimit)
	cfg := bench.CatchupConfig{Events: n, Sessions: *sessions, MaxBatchEvents: *batch, Dir: *dir, Duplicates: *dups}
	if !*noProcess {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.ProjectorBinary = bin
		cfg.ProjectorArgs = []string{"--memory-limit", strconv.FormatInt(*memLimit, 10)}
	}
	if *verbose {
		cfg.Progress = os.Stderr
	}
	if *cpuProfile != "" {
		cfg.Profile = bench.CPUProfiler(*cpuProfile)
	}
	if *memProfile != "" {
		cfg.Profile = bench.WithAllocProfile(cfg.Profile, *memProfile)
	}
	if *tracePath != "" {
		cfg.Profile = bench.WithTrace(cfg.Profile, *tracePath)
	}
	return bench.Catchup(ctx, cfg, *sessions, stdout)
}
