package bench

import (
	"context"
	"fmt"
	"io"
)

// smallCatchup is the catch-up whose peak RSS a larger one is compared
// with.
const smallCatchup = 200_000

// Catchup runs `sessionlog bench catchup`: a catch-up of cfg.Events over
// sessions sessions (after a catch-up of smallCatchup events, for the
// peak RSS the larger one is held to, when it is larger), and prints its
// BENCH lines to stdout.
func Catchup(ctx context.Context, cfg CatchupConfig, sessions int, stdout io.Writer) error {
	n := cfg.Events
	var small *CatchupResult
	if n > smallCatchup {
		// The small catch-up, with its own server, before the profile
		// starts; with its floors too, so that it starts as the large
		// one does: after floor trials on its stream (which leave the
		// server and the runtime some tens of MiB larger), not in a
		// fresh process.
		scfg := cfg
		scfg.Events, scfg.Profile, scfg.Dir = smallCatchup, nil, ""
		r, err := RunCatchup(ctx, scfg)
		if err != nil {
			return fmt.Errorf("bench catchup (%d events): %w", smallCatchup, err)
		}
		small = &r
	}
	res, err := RunCatchup(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench catchup: %w", err)
	}
	fmt.Fprintf(stdout, "BENCH name=projector-catchup value=%.0f unit=ev/s baseline=%.0f ratio=%.2f consume_only=%.0f consume_only_ratio=%.2f raw_pebble_keys_per_s=%.0f raw_small_keys_per_s=%.0f events=%d sessions=%d\n",
		res.EventsPerSec, res.ConsumeWritePerSec, res.EventsPerSec/res.ConsumeWritePerSec, res.ConsumeOnlyPerSec, res.EventsPerSec/res.ConsumeOnlyPerSec,
		res.RawKeysPerSec, res.RawSmallPerSec, res.Events, sessions)
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
