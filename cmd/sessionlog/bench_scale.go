package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench scale [--quick]`: sessions written through the writer
// on one node, the cost of an append in the first sessions against the
// last ones, and the peak RSS (internal/bench.Scale).
func runBenchScale(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench scale")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "10,000 sessions, windows of 1,000 (default 100,000 and 10,000)")
	sessions := fs.Int("sessions", 0, "sessions written in all (overrides --quick)")
	conc := fs.Int("concurrency", 64, "sessions written at once")
	partitions := fs.Int("partitions", 1, "partitions of the store")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	n := 100_000
	if *quick {
		n = 10_000
	}
	if *sessions > 0 {
		n = *sessions
	}
	if n < 10 || *conc < 1 {
		return usageErrorf("--sessions must be >= 10 and --concurrency >= 1")
	}
	if err := checkPartitions(*partitions); err != nil {
		return err
	}
	return bench.Scale(ctx, bench.ScaleOptions{Out: stdout, Sessions: n, Window: n / 10, EventsPerSession: 10, Concurrency: *conc, Partitions: *partitions})
}
