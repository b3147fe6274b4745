package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// RestartConfig configures the first-append-after-restart benchmark.
type RestartConfig struct {
	Events   int // of the session (default 1,000,000)
	Restarts int // writers started after the first (default 5)
	// Services: then time the first work of a repairer and a forker
	// started on the session (servicesAfterRestart); ForkCopy: a whole
	// fork of it too.
	Services, ForkCopy bool
	Dir                string
	Logger             *slog.Logger
}

// RestartResult is the first append of a writer that does not hold the
// session: Cold with no snapshot (the whole session folded), Snap after
// each restart, with the snapshot the first writer stored after its
// append.
type RestartResult struct {
	Events int
	Cold   FirstAppend
	Snap   []FirstAppend
	// The repairer's and the forker's first work (Config.Services).
	Repair, Resolve, Fork FirstWork
}

// FirstAppend is one writer's first append to the session.
type FirstAppend struct {
	Took time.Duration
	// HeapBytes is the heap in use after the append (after a GC) less
	// before it: what loading the session keeps; AllocBytes what the
	// append allocated in all.
	HeapBytes, AllocBytes int64
}

// RunRestart stores one session of cfg.Events events and times the first
// append of a writer started on it, twice: without a snapshot, then, after
// that writer stored one and stopped, with it.
func RunRestart(ctx context.Context, cfg RestartConfig) (RestartResult, error) {
	if cfg.Events <= 0 {
		cfg.Events = 1_000_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	res := RestartResult{Events: cfg.Events}
	e, err := startEmbedded(ctx, cfg.Dir, "sessionlog-bench-restart-", cfg.Logger)
	if err != nil {
		return res, err
	}
	defer e.close()
	const id = "bench-restart"
	if _, err := gen.Seed(ctx, e.st, id, cfg.Events, schema.MaxBatchEvents); err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}
	if cfg.Restarts <= 0 {
		cfg.Restarts = 5
	}
	if res.Cold, err = firstAppend(ctx, e, id, 0, cfg.Logger); err != nil {
		return res, err
	}
	if h, err := e.st.SnapshotHeadOf(ctx, id); err != nil || h == nil {
		return res, fmt.Errorf("the first writer stored no snapshot (%v)", err)
	}
	for k := 1; k <= cfg.Restarts; k++ {
		fa, err := firstAppend(ctx, e, id, k, cfg.Logger)
		if err != nil {
			return res, err
		}
		res.Snap = append(res.Snap, fa)
	}
	if cfg.Services {
		if err := servicesAfterRestart(ctx, e, id, cfg.Restarts, cfg.ForkCopy, &res, cfg.Logger); err != nil {
			return res, err
		}
	}
	return res, nil
}

// firstAppend runs a writer, times its first append (k: the writer's
// number) and stops it, which waits for the snapshot it writes.
func firstAppend(ctx context.Context, e *embedded, id string, k int, logger *slog.Logger) (FirstAppend, error) {
	var fa FirstAppend
	runCtx, stop := context.WithCancel(ctx)
	w, err := assemble.NewWriter(assemble.DefaultWriter(), e.st, assemble.Deps{Conn: e.nc, Logger: logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		stop()
		return fa, err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); w.Ready() != nil; {
		if time.Now().After(deadline) {
			return fa, fmt.Errorf("writer not ready: %v", w.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Writers 0, 2, 4... start a turn, the next ends it.
	ev := map[string]any{"eventId": fmt.Sprintf("bench-restart-%d", k), "type": schema.TypeTurnStarted, "turnId": fmt.Sprintf("bench-restart-%d", k/2)}
	if k%2 == 1 {
		ev["type"], ev["data"] = schema.TypeTurnEnded, map[string]any{"reason": "completed"}
	}
	body, _ := json.Marshal(map[string]any{"sessionId": id, "events": []map[string]any{ev}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	reqCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t := time.Now()
	m, err := e.nc.RequestWithContext(reqCtx, logstore.SubjectAppend, body)
	fa.Took = time.Since(t)
	if err != nil {
		return fa, fmt.Errorf("append: %w", err)
	}
	var rep struct {
		LastSeq uint64          `json:"lastSeq"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &rep); err != nil || rep.Error != nil || rep.LastSeq == 0 {
		return fa, fmt.Errorf("append answered %s", m.Data)
	}
	runtime.ReadMemStats(&after)
	fa.AllocBytes = int64(after.TotalAlloc - before.TotalAlloc)
	runtime.GC()
	runtime.ReadMemStats(&after)
	fa.HeapBytes = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	return fa, nil
}
