package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench catchup [--quick]`: fill a stream with N events over
// 1,000 sessions, then time the projector from an empty store to caught
// up against the raw floor of writing N Pebble keys in batches of the same
// size with no folding.
func runBenchCatchup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench catchup")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "200,000 events instead of 1,000,000")
	events := fs.Int("events", 0, "events to fill (default 1,000,000; --quick 200,000)")
	sessions := fs.Int("sessions", 1000, "sessions the events are spread over")
	batch := fs.Int("max-batch-events", 0, "events per Pebble batch (0: the projector's default)")
	dir := fs.String("dir", "", "working directory (default a temporary one, removed afterwards)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the catch-up to this file")
	verbose := fs.Bool("v", false, "print progress to stderr")
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
	cfg := bench.CatchupConfig{Events: n, Sessions: *sessions, MaxBatchEvents: *batch, Dir: *dir}
	if *verbose {
		cfg.Progress = os.Stderr
	}
	if *cpuProfile != "" {
		cfg.Profile = func() func() {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				fmt.Fprintln(os.Stderr, "cpuprofile:", err)
				return func() {}
			}
			pprof.StartCPUProfile(f)
			return func() { pprof.StopCPUProfile(); f.Close() }
		}
	}
	res, err := bench.RunCatchup(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench catchup: %w", err)
	}
	fmt.Fprintf(stdout, "BENCH name=projector-catchup value=%.0f unit=ev/s baseline=%.0f ratio=%.2f events=%d sessions=%d raw_small_keys_per_s=%.0f\n",
		res.EventsPerSec, res.RawKeysPerSec, res.EventsPerSec/res.RawKeysPerSec, res.Events, *sessions, res.RawSmallPerSec)
	fmt.Fprintf(stdout, "BENCH name=projector-rebuild value=%.2f unit=s events=%d\n", res.Catchup.Seconds(), res.Events)
	fmt.Fprintf(stdout, "BENCH name=projector-peak-rss value=%.0f unit=MiB heap_after_mib=%.0f\n", float64(res.PeakRSSBytes)/(1<<20), float64(res.HeapAfter)/(1<<20))
	return nil
}
