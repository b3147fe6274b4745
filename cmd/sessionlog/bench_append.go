package main

import (
	"context"
	"io"
	"strings"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench append [--quick]`: raw JetStream publish floor, the
// writer service path and the client, 64 concurrent sessions, 1-event
// appends and 10-event batches (internal/bench.Append).
func runBenchAppend(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench append")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "a few seconds per scenario (under a minute in all)")
	sessions := fs.Int("sessions", 64, "concurrent sessions")
	dur := fs.Duration("duration", 0, "duration per scenario (overrides --quick)")
	writerTCP := fs.Bool("writer-tcp", false, "connect the writer over TCP, as a writer in its own process (default: in-process, as `up` runs it)")
	only := fs.String("only", "", "comma-separated scenarios to run (with the baselines they need), e.g. writer-1")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (every scenario) to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *sessions < 1 {
		return usageErrorf("--sessions must be >= 1")
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return bench.Append(ctx, bench.AppendOptions{Quick: *quick, Out: stdout, Sessions: *sessions, Duration: *dur, Only: splitList(*only), WriterTCP: *writerTCP})
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
