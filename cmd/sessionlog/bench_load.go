package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench load [--quick]`: load the state of a 10,000-event
// session through pkg/client (sessions.api.read) and through the
// projector's HTTP API, against reading the same messages raw from the
// stream, p50 and p99; and the first append of a writer restarted on a
// session of a million events (--restart-events), with the snapshot the
// writer before it stored (the median of five restarts), against one
// without; then, on the same session, the first work of a repairer (an
// on-demand repair) and of a forker (a fork refused at an unsafe cut,
// answered from the parent's scan; with --fork-copy a whole fork too)
// started on it, with the snapshot and without.
func runBenchLoad(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench load")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "20 rounds instead of 100")
	events := fs.Int("events", 10_000, "events of the session")
	rounds := fs.Int("rounds", 0, "loads of each kind (default 100; --quick 20)")
	restartEvents := fs.Int("restart-events", 0, "events of the session appended to after a restart (default 1,000,000; --quick 100,000; -1: skip)")
	forkCopy := fs.Bool("fork-copy", false, "also time a whole fork of the restarted session (every event copied), with the snapshot and without")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed rounds (all three kinds of load) to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	n := *rounds
	if n <= 0 {
		n = 100
		if *quick {
			n = 20
		}
	}
	cfg := bench.LoadConfig{Events: *events, Rounds: n}
	if *cpuProfile != "" {
		cfg.Profile = bench.CPUProfiler(*cpuProfile)
	}
	res, err := bench.RunLoad(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench load: %w", err)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	raw50, raw99 := bench.Quantile(res.Raw, 0.5), bench.Quantile(res.Raw, 0.99)
	for _, k := range []struct {
		name string
		ds   []time.Duration
	}{{"load-client", res.Client}, {"load-http", res.HTTP}} {
		p50, p99 := bench.Quantile(k.ds, 0.5), bench.Quantile(k.ds, 0.99)
		fmt.Fprintf(stdout, "BENCH name=%s value=%.2f unit=ms baseline=%.2f ratio=%.2f p99_ms=%.2f baseline_p99_ms=%.2f events=%d rounds=%d\n",
			k.name, ms(p50), ms(raw50), ms(p50)/ms(raw50), ms(p99), ms(raw99), res.Events, len(k.ds))
	}
	fmt.Fprintf(stdout, "BENCH name=load-raw value=%.2f unit=ms p99_ms=%.2f events=%d rounds=%d\n",
		ms(raw50), ms(raw99), res.Events, len(res.Raw))
	re := *restartEvents
	if re == 0 {
		re = 1_000_000
		if *quick {
			re = 100_000
		}
	}
	if re < 0 {
		return nil
	}
	rr, err := bench.RunRestart(ctx, bench.RestartConfig{Events: re, Services: true, ForkCopy: *forkCopy})
	if err != nil {
		return fmt.Errorf("bench load: first append after restart: %w", err)
	}
	// The median restart (by time) and the slowest.
	slices.SortFunc(rr.Snap, func(a, b bench.FirstAppend) int { return cmp.Compare(a.Took, b.Took) })
	med, worst := rr.Snap[(len(rr.Snap)-1)/2], rr.Snap[len(rr.Snap)-1]
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(stdout, "BENCH name=load-first-append value=%.2f unit=ms baseline=%.2f ratio=%.3f max_ms=%.2f heap_mb=%.1f baseline_heap_mb=%.1f alloc_mb=%.1f baseline_alloc_mb=%.1f events=%d restarts=%d\n",
		ms(med.Took), ms(rr.Cold.Took), ms(med.Took)/ms(rr.Cold.Took), ms(worst.Took), mb(med.HeapBytes), mb(rr.Cold.HeapBytes),
		mb(med.AllocBytes), mb(rr.Cold.AllocBytes), rr.Events, len(rr.Snap))
	for _, w := range []struct {
		name string
		fw   bench.FirstWork
	}{{"load-first-repair", rr.Repair}, {"load-first-fork-resolve", rr.Resolve}, {"load-first-fork", rr.Fork}} {
		if len(w.fw.Snap) == 0 {
			continue
		}
		slices.Sort(w.fw.Snap)
		slices.Sort(w.fw.Cold)
		med, worst, cold := w.fw.Snap[(len(w.fw.Snap)-1)/2], w.fw.Snap[len(w.fw.Snap)-1], w.fw.Cold[(len(w.fw.Cold)-1)/2]
		fmt.Fprintf(stdout, "BENCH name=%s value=%.2f unit=ms baseline=%.2f ratio=%.3f max_ms=%.2f events=%d rounds=%d baseline_rounds=%d\n",
			w.name, ms(med), ms(cold), ms(med)/ms(cold), ms(worst), rr.Events, len(w.fw.Snap), len(w.fw.Cold))
	}
	return nil
}
