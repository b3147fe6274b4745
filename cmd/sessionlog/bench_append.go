package main

import (
	"context"
	"io"
	"strconv"
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
	durable := fs.String("durable-sessions", "64,256", "comma-separated session counts of the durable scenarios (writer-durable-N against raw-publish-1-N and raw-publish-sync-N); empty: none")
	lazyGroup := fs.Bool("lazy-group-commit", false, "give the lazy server's writer group commit, which up --sync interval leaves off (an A/B of the writer path)")
	durableParts := fs.Int("durable-partitions", 1, "session streams of the durable servers: each commits its own batches")
	r3 := fs.Bool("r3", false, "also run the durable scenarios on 3-node clusters (R3), the fault suite's shape")
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
		stop, err := bench.StartCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	durableSessions := []int{}
	for _, v := range splitList(*durable) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return usageErrorf("--durable-sessions %q: want session counts >= 1", *durable)
		}
		durableSessions = append(durableSessions, n)
	}
	return bench.Append(ctx, bench.AppendOptions{Quick: *quick, Out: stdout, Sessions: *sessions, Duration: *dur, Only: splitList(*only), WriterTCP: *writerTCP,
		DurableSessions: durableSessions, LazyGroupCommit: *lazyGroup, R3: *r3, DurablePartitions: *durableParts})
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
