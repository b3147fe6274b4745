package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench erase [--quick]`: erase sessions of 10k, 100k and 1M
// events (--quick: 2k and 10k) with the eraser's erase job, beside the
// rate of one secure delete at a time (how erases ran before jobs).
func runBenchErase(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench erase")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "sessions of 2,000 and 10,000 events instead of 10k, 100k and 1M")
	baseline := fs.Int("baseline", 2000, "events of each session deleted one at a time first (the baseline rate)")
	purge := fs.Bool("purge", true, "also time a purge of the subject (a candidate that leaves the bytes in the files)")
	sizes := fs.String("sizes", "", "comma-separated session sizes instead of the defaults (100000,1000000)")
	seal := fs.Bool("seal", true, "the session's bodies sealed (the job destroys the key and purges) instead of plain (one secure delete per event)")
	verbose := fs.Bool("v", false, "print progress to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	cfg := bench.EraseConfig{Sizes: []int{10_000, 100_000, 1_000_000}, Baseline: *baseline, Purge: *purge, Seal: *seal}
	if *quick {
		cfg.Sizes = []int{2_000, 10_000}
		cfg.Baseline = min(*baseline, 500)
	}
	if *sizes != "" {
		cfg.Sizes = nil
		for _, f := range splitList(*sizes) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 2 {
				return usageErrorf("--sizes %q: want numbers of events of at least 2", *sizes)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
	}
	if *verbose {
		cfg.Progress = os.Stderr
	}
	res, err := bench.RunErase(ctx, cfg)
	for _, r := range res {
		fmt.Fprintf(stdout, "BENCH name=erase-%s value=%.0f unit=events/s baseline=%.1f ratio=%.1f elapsed_s=%.1f events=%d sealed=%v",
			sizeName(r.Events), r.Rate, r.Baseline, r.Rate/r.Baseline, r.Elapsed.Seconds(), r.Events, r.Sealed)
		if r.PurgeRate > 0 {
			fmt.Fprintf(stdout, " purge=%.0f", r.PurgeRate)
		}
		fmt.Fprintln(stdout)
	}
	if err != nil {
		return fmt.Errorf("bench erase: %w", err)
	}
	return nil
}

// sizeName writes 10000 as 10k and 1000000 as 1M.
func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
