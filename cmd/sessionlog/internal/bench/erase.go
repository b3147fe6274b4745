package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// EraseConfig configures the erase benchmark (docs/adr/009-erase-jobs.md).
type EraseConfig struct {
	// Sizes: the sessions erased, one per stack (default 10k, 100k, 1M).
	Sizes []int
	// Baseline: events of each session deleted first one at a time, as
	// erases did before jobs (default 2,000): that rate is the baseline.
	Baseline int
	// Purge: also time a purge of the subject of a session of the first
	// size (a candidate that leaves the bytes in the block files).
	Purge bool
	// Seal: the session is written by a store that seals bodies
	// (logstore.Config.SealBodies), so the job destroys its key and
	// purges it (docs/adr/011-sealed-bodies.md) instead of deleting each
	// event securely.
	Seal     bool
	Dir      string
	Logger   *slog.Logger
	Progress io.Writer
}

// EraseResult is one size's figures: events per second.
type EraseResult struct {
	Events   int
	Sealed   bool
	Rate     float64 // the erase job (hash, parallel secure deletes, records, audit)
	Baseline float64 // one secure delete at a time, each after a read of the oldest
	Elapsed  time.Duration
	// PurgeRate: the subject purged in one request (Purge only; 0 else).
	PurgeRate float64
}

var errBaselineDone = errors.New("baseline done")

// RunErase stores a session of each size on a stack of its own and
// erases it: the first Baseline events one at a time, the rest by the
// eraser's erase job.
func RunErase(ctx context.Context, cfg EraseConfig) ([]EraseResult, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{10_000, 100_000, 1_000_000}
	}
	if cfg.Baseline <= 0 {
		cfg.Baseline = 2000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	say := sayer(cfg.Progress)
	var out []EraseResult
	for i, n := range cfg.Sizes {
		res, err := eraseOnce(ctx, cfg, n, cfg.Purge && i == 0, say)
		if err != nil {
			return out, fmt.Errorf("%d events: %w", n, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func eraseOnce(ctx context.Context, cfg EraseConfig, n int, purge bool, say func(string, ...any)) (EraseResult, error) {
	res := EraseResult{Events: n, Sealed: cfg.Seal}
	e, err := startEmbedded(ctx, cfg.Dir, "sessionlog-bench-erase-", cfg.Logger)
	if err != nil {
		return res, err
	}
	defer e.close()
	if cfg.Seal {
		if e.st, err = logstore.Open(ctx, e.nc, logstore.Config{Logger: cfg.Logger, SealBodies: true}); err != nil {
			return res, err
		}
	}
	const id = "bench-erase"
	say("erase %d: seeding", n)
	if _, err := gen.Seed(ctx, e.st, id, n, schema.MaxBatchEvents); err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}
	if purge {
		const other = "bench-purge"
		if _, err := gen.Seed(ctx, e.st, other, n, schema.MaxBatchEvents); err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
		loc, err := e.st.Locate(other)
		if err != nil {
			return res, err
		}
		b, _ := json.Marshal(map[string]string{"filter": loc.Subject})
		start := time.Now()
		m, err := e.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+loc.Stream, b)
		if err != nil {
			return res, fmt.Errorf("purge: %w", err)
		}
		var r struct {
			Purged uint64 `json:"purged"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Purged != uint64(n) {
			return res, fmt.Errorf("purge: %s", m.Data)
		}
		res.PurgeRate = float64(n) / time.Since(start).Seconds()
	}
	base := min(cfg.Baseline, n/2)
	say("erase %d: %d events one at a time", n, base)
	deleted := 0
	start := time.Now()
	_, err = e.st.EraseEvents(ctx, id, func() error {
		if deleted++; deleted == base {
			return errBaselineDone
		}
		return nil
	})
	if !errors.Is(err, errBaselineDone) {
		return res, fmt.Errorf("baseline: %v", err)
	}
	res.Baseline = float64(base) / time.Since(start).Seconds()

	r, err := assemble.NewEraser(assemble.DefaultEraser(), e.st, assemble.Deps{Conn: e.nc, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return res, err
	}
	say("erase %d: the erase job on the other %d", n, n-base)
	start = time.Now()
	rep, err := r.Erase(ctx, api.EraseRequest{SessionID: id, Reason: "bench", By: "bench"})
	if err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	if rep.Events != uint64(n-base) {
		return res, fmt.Errorf("the job erased %d events, want %d", rep.Events, n-base)
	}
	if m, err := e.st.NextAfter(ctx, id, 0); err != nil || m != nil {
		return res, fmt.Errorf("events left after the erase (%v)", err)
	}
	res.Rate = float64(n-base) / res.Elapsed.Seconds()
	return res, nil
}

// sayer prints a line of progress to w, if w is set.
func sayer(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}
