package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench repair [--quick]`: orphan N sessions at once and time
// each lease's expiry to its committed repair, after the grace period.
func runBenchRepair(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench repair")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "200 sessions instead of 1000")
	sessions := fs.Int("sessions", 0, "sessions to orphan (default 1000, --quick 200)")
	replicas := fs.Int("replicas", 0, "1: one embedded node; 3: a 3-node cluster with R3; 0: both (two BENCH lines)")
	ttl := fs.Duration("lease-ttl", 2*time.Second, "lease TTL of the orphaned sessions")
	grace := fs.Duration("grace", 500*time.Millisecond, "repairer grace period (subtracted from the latencies)")
	conc := fs.Int("concurrency", 0, "repairer concurrency (0: its default)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the repairs (from the claims to the last repair) to this file")
	verbose := fs.Bool("v", false, "print progress and the repairer's logs (at --log-level) to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	n := *sessions
	if n <= 0 {
		n = 1000
		if *quick {
			n = 200
		}
	}
	var topologies []int
	switch *replicas {
	case 0:
		topologies = []int{1, 3}
	case 1, 3:
		topologies = []int{*replicas}
	default:
		return usageErrorf("--replicas %d: want 1, 3 or 0 (both)", *replicas)
	}
	for _, r := range topologies {
		cfg := bench.RepairConfig{Sessions: n, LeaseTTL: *ttl, Grace: *grace, Replicas: r, Concurrency: *conc}
		if *verbose {
			cfg.Progress = os.Stderr
			log, err := newLogger(fs, os.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger = log
		}
		if *cpuProfile != "" {
			path := *cpuProfile
			if len(topologies) > 1 {
				path = fmt.Sprintf("%s.r%d", path, r)
			}
			cfg.Profile = bench.CPUProfiler(path)
		}
		res, err := bench.RunRepair(ctx, cfg)
		if err != nil {
			return fmt.Errorf("bench repair (R%d): %w", r, err)
		}
		name := "repair-latency"
		if r == 3 {
			name = "repair-latency-r3"
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
		ratio := 0.0
		if res.Floor > 0 {
			ratio = float64(res.P99) / float64(res.Floor)
		}
		fmt.Fprintf(stdout, "BENCH name=%s value=%s unit=ms p50=%s count=%d baseline=%s ratio=%.2f max=%s replicas=%d grace_ms=%s"+
			" marker_lag_p50=%s marker_lag_p99=%s after_due_p50=%s after_due_p99=%s\n",
			name, ms(res.P99), ms(res.P50), res.Count, ms(res.Floor), ratio, ms(res.Max), r, ms(*grace),
			ms(res.MarkerP50), ms(res.MarkerP99), ms(res.AfterDueP50), ms(res.AfterDueP99))
	}
	return nil
}
