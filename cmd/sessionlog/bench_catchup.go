package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench catchup [--quick]`: fill a stream with N events over
// 1,000 sessions, then time the projector from an empty store to caught
// up against the floor of consuming the same stream and writing its
// events to Pebble without folding (and of consuming it alone, and of
// writing the keys to Pebble alone). The full run measures a 200,000-event
// catch-up first, for the peak RSS the 1,000,000-event one is held to.
// smallCatchup is the catch-up whose peak RSS a larger one is compared
// with.
const smallCatchup = 200_000

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
	applyProjectorMemory(*memLimit)
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
		cfg.Profile = cpuProfiler(*cpuProfile)
	}
	if *memProfile != "" {
		cfg.Profile = withAllocProfile(cfg.Profile, *memProfile)
	}
	if *tracePath != "" {
		cfg.Profile = withTrace(cfg.Profile, *tracePath)
	}
	var small *bench.CatchupResult
	if n > smallCatchup {
		// The small catch-up, with its own server, before the profile
		// starts; with its floors too, so that it starts as the large
		// one does: after floor trials on its stream (which leave the
		// server and the runtime some tens of MiB larger), not in a
		// fresh process.
		scfg := cfg
		scfg.Events, scfg.Profile, scfg.Dir = smallCatchup, nil, ""
		r, err := bench.RunCatchup(ctx, scfg)
		if err != nil {
			return fmt.Errorf("bench catchup (%d events): %w", smallCatchup, err)
		}
		small = &r
	}
	res, err := bench.RunCatchup(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench catchup: %w", err)
	}
	fmt.Fprintf(stdout, "BENCH name=projector-catchup value=%.0f unit=ev/s baseline=%.0f ratio=%.2f consume_only=%.0f consume_only_ratio=%.2f raw_pebble_keys_per_s=%.0f raw_small_keys_per_s=%.0f events=%d sessions=%d\n",
		res.EventsPerSec, res.ConsumeWritePerSec, res.EventsPerSec/res.ConsumeWritePerSec, res.ConsumeOnlyPerSec, res.EventsPerSec/res.ConsumeOnlyPerSec,
		res.RawKeysPerSec, res.RawSmallPerSec, res.Events, *sessions)
	fmt.Fprintf(stdout, "BENCH name=projector-rebuild value=%.2f unit=s events=%d cpu_s=%.2f\n", res.Catchup.Seconds(), res.Events, res.CatchupCPU.Seconds())
	// CPU per event, the processes (server included): what the
	// rates above cost, less at the mercy of other work on the machine.
	cpuPerEv := float64(res.CatchupCPU.Microseconds()) / float64(res.Events)
	fmt.Fprintf(stdout, "BENCH name=projector-catchup-cpu value=%.2f unit=us/ev baseline=%.2f ratio=%.2f consume_only=%.2f\n",
		cpuPerEv, res.ConsumeWriteCPU, res.ConsumeWriteCPU/cpuPerEv, res.ConsumeOnlyCPU)
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	if res.Process.PeakRSSBytes > 0 {
		// The projector as a process of its own: its peak is all it holds.
		pr := &res.Process
		if small != nil {
			fmt.Fprintf(stdout, "BENCH name=projector-process-peak-rss value=%.0f unit=MiB baseline=%.0f ratio=%.2f events=%d baseline_events=%d catchup_s=%.2f baseline_catchup_s=%.2f cpu_us_per_ev=%.2f\n",
				mib(pr.PeakRSSBytes), mib(small.Process.PeakRSSBytes), float64(pr.PeakRSSBytes)/float64(small.Process.PeakRSSBytes), res.Events, small.Events,
				pr.Catchup.Seconds(), small.Process.Catchup.Seconds(), float64(pr.CPU.Microseconds())/float64(res.Events))
		} else {
			fmt.Fprintf(stdout, "BENCH name=projector-process-peak-rss value=%.0f unit=MiB events=%d catchup_s=%.2f cpu_us_per_ev=%.2f\n",
				mib(pr.PeakRSSBytes), res.Events, pr.Catchup.Seconds(), float64(pr.CPU.Microseconds())/float64(res.Events))
		}
	}
	if small != nil {
		// growth: the peak less the RSS at the catch-up's start (the Go
		// runtime, and the server holding its stream when it runs in this
		// process), what the catch-up itself added.
		growth, sgrowth := res.PeakRSSBytes-res.Memory.StartRSS, small.PeakRSSBytes-small.Memory.StartRSS
		fmt.Fprintf(stdout, "BENCH name=projector-peak-rss value=%.0f unit=MiB baseline=%.0f ratio=%.2f events=%d baseline_events=%d heap_after_mib=%.0f start_rss_mib=%.0f heap_inuse_mib=%.0f memtables_mib=%.0f block_cache_mib=%.0f baseline_start_rss_mib=%.0f baseline_heap_inuse_mib=%.0f growth_mib=%.0f baseline_growth_mib=%.0f growth_ratio=%.2f\n",
			mib(res.PeakRSSBytes), mib(small.PeakRSSBytes), float64(res.PeakRSSBytes)/float64(small.PeakRSSBytes), res.Events, small.Events, mib(int64(res.HeapAfter)),
			mib(res.Memory.StartRSS), mib(res.Memory.HeapInUse), mib(res.Memory.MemTables), mib(res.Memory.BlockCache), mib(small.Memory.StartRSS), mib(small.Memory.HeapInUse),
			mib(growth), mib(sgrowth), float64(growth)/float64(sgrowth))
		return nil
	}
	fmt.Fprintf(stdout, "BENCH name=projector-peak-rss value=%.0f unit=MiB events=%d heap_after_mib=%.0f start_rss_mib=%.0f heap_inuse_mib=%.0f memtables_mib=%.0f block_cache_mib=%.0f\n",
		mib(res.PeakRSSBytes), res.Events, mib(int64(res.HeapAfter)), mib(res.Memory.StartRSS), mib(res.Memory.HeapInUse), mib(res.Memory.MemTables), mib(res.Memory.BlockCache))
	return nil
}

// withAllocProfile adds to profile (which may be nil) writing the
// allocation profile at its start (path + ".base") and at its stop
// (path): their difference is what the catch-up allocated.
func withAllocProfile(profile func() func(), path string) func() func() {
	write := func(p string) {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "memprofile:", err)
		}
	}
	return func() func() {
		write(path + ".base")
		stop := func() {}
		if profile != nil {
			stop = profile()
		}
		return func() {
			stop()
			write(path)
		}
	}
}

// withTrace adds to profile (which may be nil) an execution trace into
// path.
func withTrace(profile func() func(), path string) func() func() {
	return func() func() {
		stop := func() {}
		if profile != nil {
			stop = profile()
		}
		f, err := os.Create(path)
		if err == nil {
			if err = trace.Start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			return stop
		}
		return func() {
			trace.Stop()
			f.Close()
			stop()
		}
	}
}
