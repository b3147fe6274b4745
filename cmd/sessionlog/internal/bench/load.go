package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// LoadConfig configures the load benchmark.
type LoadConfig struct {
	Events int // of the session (default 10,000)
	Rounds int // loads of each kind (default 100)
	Dir    string
	Logger *slog.Logger
	// Profile, if set, is started before the timed rounds and its result
	// called after them.
	Profile func() func()
}

// LoadResult holds the latencies of each kind of load, one per round.
type LoadResult struct {
	Events int
	// Client: pkg/client's LoadState (sessions.api.read through the
	// writer, pages decoded and folded). HTTP: the projector's GET
	// /v1/sessions/{id} (the folded summary it keeps). Raw: the same
	// messages read from the stream by logstore.ReadSession, nothing
	// decoded: the floor of any load from the log.
	Client, HTTP, Raw []time.Duration
}

// RunLoad stores one session of cfg.Events events and times loading its
// state, the three ways taking turns each round.
func RunLoad(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	res := LoadResult{}
	if cfg.Events <= 0 {
		cfg.Events = 10_000
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	res.Events = cfg.Events
	e, err := startEmbedded(ctx, cfg.Dir, "sessionlog-bench-load-", cfg.Logger)
	if err != nil {
		return res, err
	}
	defer e.close()
	dir, nc, st := e.dir, e.nc, e.st
	const id = "bench-load"
	if _, err := gen.Seed(ctx, st, id, cfg.Events, schema.MaxBatchEvents); err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := assemble.NewWriter(assemble.DefaultWriter(), st, assemble.Deps{Conn: nc, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return res, err
	}
	p, err := assemble.NewProjector(assemble.DefaultProjector(filepath.Join(dir, "views")), st, assemble.Deps{Conn: nc, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return res, err
	}
	done := make(chan error, 2)
	go func() { done <- w.Run(runCtx) }()
	go func() { done <- p.Run(runCtx) }()
	defer func() { stop(); <-done; <-done }()
	for deadline := time.Now().Add(30 * time.Second); w.Ready() != nil || p.Ready() != nil; {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("not ready: writer %v, projector %v", w.Ready(), p.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	hs := httptest.NewServer(p.Handler())
	defer hs.Close()

	cl := client.New(nc)
	loadClient := func() error {
		s, err := cl.LoadState(ctx, id)
		if err == nil && s.LastSeq != uint64(cfg.Events) {
			err = fmt.Errorf("client loaded seq %d of %d", s.LastSeq, cfg.Events)
		}
		return err
	}
	loadHTTP := func() error {
		resp, err := hs.Client().Get(hs.URL + "/v1/sessions/" + id)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET session: %s", resp.Status)
		}
		return nil
	}
	loadRaw := func() error {
		n := 0
		_, err := st.ReadSession(ctx, id, 0, func(*logstore.Msg) error { n++; return nil })
		if err == nil && n != cfg.Events {
			err = fmt.Errorf("raw read %d of %d messages", n, cfg.Events)
		}
		return err
	}
	for round := range cfg.Rounds + 1 {
		if round == 1 && cfg.Profile != nil {
			defer cfg.Profile()()
		}
		for _, k := range []struct {
			fn  func() error
			out *[]time.Duration
		}{{loadClient, &res.Client}, {loadHTTP, &res.HTTP}, {loadRaw, &res.Raw}} {
			t := time.Now()
			if err := k.fn(); err != nil {
				return res, err
			}
			if round > 0 { // the first round warms the caches
				*k.out = append(*k.out, time.Since(t))
			}
		}
	}
	return res, nil
}

// Quantile is the q-quantile (nearest rank) of ds.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
