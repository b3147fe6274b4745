package main

import (
	"context"
	"flag"
	"io"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

const defaultWriterHTTP = "127.0.0.1:8081"

func runWriter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("writer", defaultWriterHTTP, stderr)
	cfg := writerFlags(c.fs)
	return c.run(ctx, args, stderr, "sessionlog-writer", &cfg.LeaseTTL, func() error {
		if cfg.LeaseTTL <= 0 {
			return usageErrorf("--lease-ttl must be > 0")
		}
		return nil
	}, func(store *logstore.Store, d assemble.Deps) (service, error) {
		return assemble.NewWriter(*cfg, store, d)
	})
}

// writerFlags binds the writer's settings to fs, defaulting to
// assemble.DefaultWriter: the values `up` runs the writer with.
func writerFlags(fs *flag.FlagSet) *assemble.Writer {
	cfg := assemble.DefaultWriter()
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "session lease TTL (per-key TTL of SESSION_LEASES)")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "requests handled at once")
	fs.IntVar(&cfg.StateCacheSize, "state-cache", cfg.StateCacheSize, "sessions whose folded state is cached")
	return &cfg
}
