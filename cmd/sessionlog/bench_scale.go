package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench scale [--quick]`: sessions written through a writer
// process on one node, the cost of an append in the first sessions
// against the last ones, the peak RSS of the writer and of a repairer
// process sweeping them all; P=1 against P=3 on a three-node cluster, with
// where the CPU of each went (the cores kept busy, and the CPU per event
// of each node, partition, the writer and the load); the projector
// catching up over P=1 and P=3 (internal/bench.Scale).
func runBenchScale(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench scale")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "10,000 sessions (windows of 1,000), shorter cluster rounds, a 100,000-event catch-up")
	sessions := fs.Int("sessions", 0, "sessions written in all (default 100,000; --quick 10,000)")
	conc := fs.Int("concurrency", 64, "sessions written at once")
	partitions := fs.Int("partitions", 1, "partitions of the store the sessions are written to")
	clusterSessions := fs.Int("cluster-sessions", 256, "concurrent sessions of the P=1 against P=3 comparison")
	catchupEvents := fs.Int("catchup-events", 0, "events the projector catches up with (default 1,000,000; --quick 100,000)")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "lease TTL of the writer and the repairer (the first sessions' leases lapse while the last are written)")
	only := fs.String("only", "", "comma-separated parts to run: flat, partitions, catchup (default all)")
	verbose := fs.Bool("v", false, "print progress to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	opt := bench.ScaleOptions{
		Out: stdout, Sessions: 100_000, EventsPerSession: 10, Concurrency: *conc, Partitions: *partitions, LeaseTTL: *leaseTTL,
		ClusterSessions: *clusterSessions, ClusterRounds: 5, ClusterRound: 10 * time.Second,
		CatchupEvents: 1_000_000, CatchupSessions: 1000, CatchupTrials: 2,
	}
	if *quick {
		opt.Sessions, opt.ClusterRounds, opt.ClusterRound, opt.CatchupEvents = 10_000, 3, 4*time.Second, 100_000
	}
	if *sessions > 0 {
		opt.Sessions = *sessions
	}
	if *catchupEvents > 0 {
		opt.CatchupEvents = *catchupEvents
	}
	opt.Window = opt.Sessions / 10
	if opt.Sessions < 10 || *conc < 1 || *clusterSessions < 1 || *leaseTTL <= 0 {
		return usageErrorf("--sessions must be >= 10, --concurrency and --cluster-sessions >= 1, --lease-ttl > 0")
	}
	if err := checkPartitions(*partitions); err != nil {
		return err
	}
	opt.Only = splitList(*only)
	if *verbose {
		opt.Progress = os.Stderr
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	opt.Binary = bin
	return bench.Scale(ctx, opt)
}
