package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench fork [--quick]`: fork parents of 100 .. 100,000 events
// and compare each with publishing the child's same messages as raw atomic
// batches in the same run.
func runBenchFork(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench fork")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "sizes up to 10,000 only")
	sizes := fs.String("sizes", "", "comma-separated prefix lengths (default 100,1000,10000,100000)")
	verbose := fs.Bool("v", false, "print each run on stderr, and the services' log at debug level (the forker's timing of each fork: scan and copy)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the fork requests (every size and run, merged) to this file, and one of the floors' publishing to this file with .floor appended")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	var ns []int
	if *sizes != "" {
		for _, f := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return usageErrorf("--sizes: %q is not a positive number", f)
			}
			ns = append(ns, n)
		}
	} else {
		for _, n := range bench.ForkSizes {
			if *quick && n > 10_000 {
				continue
			}
			ns = append(ns, n)
		}
	}
	cfg := bench.ForkConfig{Sizes: ns}
	if *verbose {
		cfg.Progress = os.Stderr
		// The forker's timing of each fork: its scan and its copy.
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if *cpuProfile != "" {
		for _, path := range []string{*cpuProfile, *cpuProfile + ".floor"} {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if cfg.CPUProfile == nil {
				cfg.CPUProfile = f
			} else {
				cfg.FloorCPUProfile = f
			}
		}
	}
	res, err := bench.RunFork(ctx, cfg)
	for _, r := range res {
		fmt.Fprintln(stdout, r.Line())
	}
	if err != nil {
		return fmt.Errorf("bench fork: %w", err)
	}
	return nil
}
