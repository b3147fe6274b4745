package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// CatchupConfig configures the projector catch-up benchmark.
type CatchupConfig struct {
	Events   int // default 1,000,000
	Sessions int // default 1,000
	// MaxBatchEvents of the projector and of the raw floor (0: the
	// projector's default).
	MaxBatchEvents int
	// Dir holds the server and the stores (default a new temp dir,
	// removed afterwards).
	Dir      string
	Logger   *slog.Logger
	Progress io.Writer
	// CPUProfile, if set, is written during the catch-up.
	Profile func() (stop func())
	// NoFloors measures the catch-up alone (its rate and peak RSS).
	NoFloors bool
	// Duplicates, if set, is the stream's deduplication window during the
	// fill, waited out before the floors and the catch-up. The server runs
	// in this process: the message ids it keeps for the window (about 110
	// bytes of heap per event) would otherwise be in the heap every
	// garbage collection of the catch-up scans, as they are not in a
	// projector's process (the server is another one). 0: the store's
	// default window (2 minutes, longer than the benchmark waits).
	Duplicates time.Duration
	// ProjectorBinary, if set, is a sessionlog binary to catch up once
	// more with, after the floors, as `sessionlog projector` (its defaults
	// but the store directory and the batch size): a process of its own,
	// as deployed, whose peak RSS is the projector's alone, not that of
	// this process, which holds the server and what the fill and the
	// floors left behind. The rate and CPU figures are those of the
	// catch-up in this process, measured as the floors are (in the
	// server's process).
	ProjectorBinary string
	// ProjectorArgs are added to that process's command line (the bench
	// command passes its --memory-limit).
	ProjectorArgs []string
}

// CatchupResult is what RunCatchup measured.
type CatchupResult struct {
	Events int
	// Catchup is the time from an empty store to caught up with the stream
	// (a full rebuild), and EventsPerSec its rate.
	Catchup      time.Duration
	EventsPerSec float64
	// ConsumeWritePerSec is the floor that counts: the same stream
	// consumed and written to Pebble, one key per event and one summary
	// key per touched session and batch, sized like the projector's, no
	// decoding, no folding (consumeFloor); ConsumeOnlyPerSec the stream
	// consumed alone. Medians of the trials around the catch-up.
	ConsumeWritePerSec float64
	ConsumeOnlyPerSec  float64
	// The process's CPU µs per event of the same (medians).
	ConsumeWriteCPU, ConsumeOnlyCPU float64
	// RawKeysPerSec: the same number of keys (the event index key, the
	// stored event body as value) written to a fresh Pebble store in
	// batches of the same size, no folding, no NATS.
	RawKeysPerSec  float64
	RawSmallPerSec float64 // the same with 8-byte values
	ViewKeys       int
	// PeakRSSBytes is the VmHWM of this process (server and projector)
	// during the catch-up, where the kernel lets it be reset (Linux), else
	// since the start.
	PeakRSSBytes int64
	// Process is the catch-up of the projector as a process of its own
	// (with ProjectorBinary): its time, its CPU with the server's, and its
	// peak RSS.
	Process struct {
		Catchup      time.Duration
		CPU          time.Duration
		PeakRSSBytes int64
	}
	// CatchupCPU is the CPU time (user and system) of the whole process
	// during the catch-up, the embedded server included: less at the
	// mercy of other work on the machine than the rate.
	CatchupCPU time.Duration
	HeapAfter  uint64 // live heap after the catch-up (after a GC), the projector's caches still held
	// Memory is what the peak RSS is made of, sampled during the catch-up.
	Memory MemoryPeaks
}

// MemoryPeaks are the largest values seen of what takes the process's
// memory during a catch-up (the RSS when it started: the server with its
// stream, the Go runtime).
type MemoryPeaks struct {
	StartRSS, HeapInUse, MemTables, BlockCache int64
}

// sampleMemory samples the Go heap and the projector's Pebble memtables
// and block cache every 100 ms until the returned function is called,
// which returns the peaks.
func sampleMemory(p *projector.Service) func() MemoryPeaks {
	var pk MemoryPeaks
	pk.StartRSS = currentRSS()
	stop, done := make(chan struct{}), make(chan struct{})
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		pk.HeapInUse = max(pk.HeapInUse, int64(ms.HeapInuse))
		if db := p.DB(); db != nil {
			m := db.Metrics()
			pk.MemTables = max(pk.MemTables, m.MemTableBytes)
			pk.BlockCache = max(pk.BlockCache, m.BlockCacheBytes)
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() MemoryPeaks {
		close(stop)
		<-done
		return pk
	}
}

// RunCatchup fills a stream with cfg.Events events over cfg.Sessions
// sessions, then measures the projector catching up from an empty store.
func RunCatchup(ctx context.Context, cfg CatchupConfig) (CatchupResult, error) {
	var res CatchupResult
	if cfg.Events <= 0 {
		cfg.Events = 1_000_000
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = 1000
	}
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = projector.DefaultConfig().MaxBatchEvents
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	e, err := startEmbedded(ctx, cfg.Dir, "sessionlog-bench-catchup-", cfg.Logger)
	if err != nil {
		return res, err
	}
	defer e.close()
	dir, ls := e.dir, e.st

	if cfg.Duplicates > 0 {
		// Open again with the short window: the stream's configuration
		// is updated before the fill.
		if ls, err = logstore.Open(ctx, e.nc, logstore.Config{Logger: cfg.Logger, Duplicates: cfg.Duplicates}); err != nil {
			return res, err
		}
	}
	say("filling the stream with %d events over %d sessions", cfg.Events, cfg.Sessions)
	start := time.Now()
	fleet := gen.NewFleet("bench", cfg.Sessions, 42, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := fleet.Fill(ctx, ls, cfg.Events); err != nil {
		return res, fmt.Errorf("fill: %w", err)
	}
	say("filled in %s", time.Since(start).Round(time.Millisecond))
	if cfg.Duplicates > 0 {
		// The server drops the ids a window after they were stored (its
		// timer fires at least every window).
		time.Sleep(2*cfg.Duplicates + 100*time.Millisecond)
	}

	// The floors: the same events, generated again (same seed). One short
	// run of one is at the mercy of whatever else the two cores do (the
	// server settling after the fill, other processes), so each is run
	// before and after the catch-up, on a fresh store each time, and the
	// median is the floor: the conditions it reports are those around the
	// catch-up.
	var floor *pebbleFloor
	var cfloor *consumeFloor
	if !cfg.NoFloors {
		floor = newPebbleFloor(cfg.Events, cfg.Sessions, cfg.MaxBatchEvents, dir)
		if err := floor.run(floorTrials / 2); err != nil {
			return res, err
		}
		if cfloor, err = newConsumeFloor(ls, cfg.Events, cfg.Sessions, cfg.MaxBatchEvents, dir); err != nil {
			return res, err
		}
		for range consumeTrials / 2 {
			if err := cfloor.run(ctx); err != nil {
				return res, fmt.Errorf("consume floor: %w", err)
			}
		}
		say("consume floor before: only %.0f ev/s, and write %.0f ev/s", cfloor.consumeOnly, cfloor.consumeWrite)
	}

	// The floors' keys are gone: hand their memory back and restart the
	// peak RSS count, so that the peak reported is that of the catch-up
	// (server and projector), not of the floor's data.
	debug.FreeOSMemory()
	trimCHeap()
	resetPeakRSS()

	if err := catchupHere(ctx, cfg, e, &res); err != nil {
		return res, err
	}
	res.Events = cfg.Events
	res.EventsPerSec = float64(cfg.Events) / res.Catchup.Seconds()
	say("memory peaks: RSS at start %d MiB, Go heap in use %d MiB, Pebble memtables %d MiB, block cache %d MiB",
		res.Memory.StartRSS>>20, res.Memory.HeapInUse>>20, res.Memory.MemTables>>20, res.Memory.BlockCache>>20)
	say("caught up in %s (process CPU %s, %.2f µs/event; peak RSS %d MiB)", res.Catchup.Round(time.Millisecond), res.CatchupCPU.Round(time.Millisecond),
		float64(res.CatchupCPU.Microseconds())/float64(cfg.Events), res.PeakRSSBytes>>20)
	if cfg.ProjectorBinary != "" {
		if err := catchupProcess(ctx, cfg, e, &res); err != nil {
			return res, err
		}
		say("as a process of its own: caught up in %s (CPU %s with the server's), peak RSS %d MiB",
			res.Process.Catchup.Round(time.Millisecond), res.Process.CPU.Round(time.Millisecond), res.Process.PeakRSSBytes>>20)
	}

	if cfg.NoFloors {
		return res, nil
	}
	for range consumeTrials - consumeTrials/2 {
		if err := cfloor.run(ctx); err != nil {
			return res, fmt.Errorf("consume floor: %w", err)
		}
	}
	res.ConsumeOnlyPerSec, res.ConsumeWritePerSec = medianOf(cfloor.consumeOnly), medianOf(cfloor.consumeWrite)
	res.ConsumeOnlyCPU, res.ConsumeWriteCPU = medianOf(cfloor.consumeOnlyCPU), medianOf(cfloor.consumeWriteCPU)
	say("consume floor: only %.0f ev/s (trials %.0f), and write %.0f ev/s (trials %.0f)",
		res.ConsumeOnlyPerSec, cfloor.consumeOnly, res.ConsumeWritePerSec, cfloor.consumeWrite)
	if err := floor.run(floorTrials - floorTrials/2); err != nil {
		return res, err
	}
	res.RawKeysPerSec, res.RawSmallPerSec = medianOf(floor.bodies), medianOf(floor.small)
	say("raw floor: %.0f keys/s (event bodies; trials %.0f), %.0f keys/s (8-byte values; trials %.0f)",
		res.RawKeysPerSec, floor.bodies, res.RawSmallPerSec, floor.small)
	return res, nil
}

// catchupHere runs the projector in this process from an empty store
// until it is caught up.
func catchupHere(ctx context.Context, cfg CatchupConfig, e *embedded, res *CatchupResult) error {
	var stop func()
	if cfg.Profile != nil {
		stop = cfg.Profile()
	}
	start := time.Now()
	cpu0 := procstat.CPU()
	pcfg := assemble.DefaultProjector(filepath.Join(e.dir, "views"))
	pcfg.MaxBatchEvents = cfg.MaxBatchEvents
	p, err := assemble.NewProjector(pcfg, e.st, assemble.Deps{Logger: cfg.Logger})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	mem := sampleMemory(p)
	for p.Ready() != nil {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("projector stopped: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	res.Catchup = time.Since(start)
	res.CatchupCPU = procstat.CPU() - cpu0
	res.Memory = mem() // before the projector stops and closes its store
	if stop != nil {
		stop()
	}
	cancel()
	if err := <-done; err != nil {
		return err
	}
	res.PeakRSSBytes = peakRSS()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapAfter = ms.HeapAlloc
	runtime.KeepAlive(p)
	return nil
}

// catchupProcess runs `sessionlog projector` from an empty store until its
// /readyz answers (caught up), and reads its peak RSS before stopping it.
func catchupProcess(ctx context.Context, cfg CatchupConfig, e *embedded, res *CatchupResult) error {
	dir := filepath.Join(e.dir, "views-process")
	defer os.RemoveAll(dir)
	start := time.Now()
	cpu0 := procstat.CPU()
	args := append([]string{"--data-dir", dir, "--max-batch-events", strconv.Itoa(cfg.MaxBatchEvents), "--log-level", "warn"}, cfg.ProjectorArgs...)
	c, err := startChild(ctx, cfg.ProjectorBinary, "projector", e.nc.ConnectedUrl(), nil, args...)
	if err != nil {
		return err
	}
	res.Process.Catchup = time.Since(start)
	ccpu, err := c.cpu()
	if err != nil {
		c.kill()
		return err
	}
	res.Process.CPU = procstat.CPU() - cpu0 + ccpu
	res.Process.PeakRSSBytes, err = c.stop()
	return err
}

// floorTrials is how many times the raw Pebble floor is measured,
// consumeTrials the consume floors (half before the catch-up, half after).
const (
	floorTrials   = 2
	consumeTrials = 4
)

// pebbleFloor measures writing the benchmark's events as plain Pebble keys:
// the event index key, the stored event body as value (or an 8-byte
// value), in batches of the projector's size, into a fresh store with the
// projector's options; no folding, no NATS.
type pebbleFloor struct {
	events, sessions, batch int
	dir                     string
	bodies, small           []float64 // keys/s of each trial
}

func newPebbleFloor(events, sessions, batch int, dir string) *pebbleFloor {
	return &pebbleFloor{events: events, sessions: sessions, batch: batch, dir: dir}
}

// run measures n trials of each kind. The keys are generated for the
// trials and dropped after them, so that they do not sit in the heap
// during the catch-up.
func (r *pebbleFloor) run(n int) error {
	fleet := gen.NewFleet("bench", r.sessions, 42, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	keys := make([][]byte, 0, r.events)
	vals := make([][]byte, 0, r.events)
	for range r.events {
		e := fleet.Next()
		b, err := schema.Encode(&e)
		if err != nil {
			return err
		}
		keys = append(keys, store.EventKey(e.SessionID, e.Seq))
		vals = append(vals, b)
	}
	for i := range n {
		for _, small := range []bool{false, true} {
			rate, err := r.trial(fmt.Sprintf("raw-%d-%d-%t", len(r.bodies), i, small), keys, vals, small)
			if err != nil {
				return err
			}
			if small {
				r.small = append(r.small, rate)
			} else {
				r.bodies = append(r.bodies, rate)
			}
		}
	}
	runtime.GC()
	return nil
}

// trial times one fill of a fresh store. The store is closed (which waits
// for its flushes and compactions) and removed before the next trial or
// the catch-up starts, so no trial leaves work behind for what follows.
func (r *pebbleFloor) trial(name string, keys, vals [][]byte, small bool) (float64, error) {
	path := filepath.Join(r.dir, name)
	db, err := store.Open(path, store.Options{})
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(path)
	small8 := make([]byte, 8)
	runtime.GC()
	t := time.Now()
	last := 0
	for i := 0; i < len(keys); i += r.batch {
		// Sized like the projector's batches: at the last one's size.
		b := db.NewBatchWithSize(last + last/8)
		for j := i; j < min(i+r.batch, len(keys)); j++ {
			v := vals[j]
			if small {
				v = small8
			}
			b.SetInternal(keys[j], v)
		}
		last = b.Bytes()
		if err := b.Commit(store.Checkpoint{}); err != nil {
			db.Close()
			return 0, err
		}
	}
	rate := float64(len(keys)) / time.Since(t).Seconds()
	return rate, db.Close()
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// resetPeakRSS restarts the VmHWM count at the current RSS (Linux 4.0+;
// elsewhere a no-op).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS reads VmHWM from /proc/self/status (0 where there is none).
func peakRSS() int64 { return procStatus("VmHWM:") }

// currentRSS reads VmRSS likewise.
func currentRSS() int64 { return procStatus("VmRSS:") }

func procStatus(field string) int64 { return procStatusOf("/proc/self/status", field) }

// procStatusOf reads a field in kB of a /proc/<pid>/status file, in bytes.
func procStatusOf(path, field string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}
