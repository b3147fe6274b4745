package main

import (
	"context"
	"flag"
	"io"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

const defaultWriterHTTP = "127.0.0.1:8081"

// defaultWriterMemoryLimit is the Go heap's soft limit of a writer process
// when GOMEMLIMIT is not set. At GOGC 400 (defaultGCPercent) the heap may
// grow to five times what is live; what is live is bounded (the state
// cache of --state-cache sessions, the lease marks, --max-concurrent
// requests of at most a batch each), but five times a busy moment's
// requests is far more than the writer needs. Near the limit the
// collector works harder instead; below it nothing changes.
const defaultWriterMemoryLimit = 256 << 20

func runWriter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("writer", defaultWriterHTTP, stderr)
	cfg := writerFlags(c.fs)
	memLimit := memoryLimitFlag(c.fs, defaultWriterMemoryLimit)
	return c.run(ctx, args, stderr, "sessionlog-writer", &cfg.LeaseTTL, func() error {
		if cfg.LeaseTTL <= 0 {
			return usageErrorf("--lease-ttl must be > 0")
		}
		return nil
	}, func(store *logstore.Store, d assemble.Deps) (service, error) {
		applyMemoryLimit(*memLimit)
		return assemble.NewWriter(*cfg, store, d)
	})
}

// memoryLimitFlag binds --memory-limit, the Go heap's soft limit of a
// service process (applyMemoryLimit), with default def.
func memoryLimitFlag(fs *flag.FlagSet, def int64) *int64 {
	return bytesFlag(fs, "memory-limit", def, "soft limit of the Go heap, a `size` such as 256MiB (0: none; GOMEMLIMIT takes precedence)")
}

// writerFlags binds the writer's settings to fs, defaulting to
// assemble.DefaultWriter: the values `up` runs the writer with.
func writerFlags(fs *flag.FlagSet) *assemble.Writer {
	cfg := assemble.DefaultWriter()
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "session lease TTL (per-key TTL of SESSION_LEASES)")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "requests handled at once")
	fs.IntVar(&cfg.StateCacheSize, "state-cache", cfg.StateCacheSize, "sessions whose folded state is cached")
	fs.Float64Var(&cfg.TenantEventsPerSecond, "tenant-events-per-second", cfg.TenantEventsPerSecond, "events the agents of one tenant may append per second, a burst of as many (0: no limit)")
	return &cfg
}
