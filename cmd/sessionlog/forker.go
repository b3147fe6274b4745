package main

import (
	"context"
	"flag"
	"io"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/forker"
)

const defaultForkerHTTP = "127.0.0.1:8084"

func runForker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("forker", defaultForkerHTTP, stderr)
	cfg := forkerFlags(c.fs)
	return c.run(ctx, args, stderr, forker.ServiceName, nil, func() error {
		if cfg.BatchSize < 2 || cfg.BatchSize > 1000 || cfg.SweepEvery <= 0 || cfg.StaleAfter <= 0 || cfg.ForkTimeout <= 0 {
			return usageErrorf("--batch-size must be 2..1000 and the durations > 0")
		}
		return nil
	}, func(store *logstore.Store, d assemble.Deps) (service, error) {
		return assemble.NewForker(*cfg, store, d)
	})
}

// forkerFlags binds the forker's settings to fs, defaulting to
// assemble.DefaultForker: the values `up` runs the forker with.
func forkerFlags(fs *flag.FlagSet) *assemble.Forker {
	cfg := assemble.DefaultForker()
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "events per atomic batch of a copy (at most 1000)")
	fs.IntVar(&cfg.MaxConcurrent, "concurrency", cfg.MaxConcurrent, "forks copied at once")
	fs.DurationVar(&cfg.SweepEvery, "sweep-interval", cfg.SweepEvery, "how often copies left behind by a dead forker are looked for")
	fs.DurationVar(&cfg.StaleAfter, "stale-after", cfg.StaleAfter, "a copy whose record was not renewed this long is taken over")
	fs.DurationVar(&cfg.ForkTimeout, "fork-timeout", cfg.ForkTimeout, "bound on one fork request's copy")
	return &cfg
}
