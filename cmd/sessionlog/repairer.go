package main

import (
	"context"
	"flag"
	"io"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gcpolicy"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/repairer"
)

const defaultRepairerHTTP = "127.0.0.1:8083"

// defaultRepairerMemoryLimit is the Go heap's soft limit of a repairer
// process when GOMEMLIMIT is not set. What it keeps is bounded (the state
// cache, the sweep's queue, --concurrency evaluations and the grouped
// batches they wait for), but at GOGC 400 (gcpolicy.DefaultGCPercent) a burst of
// repairs or a sweep of many sessions lets the heap grow to five times
// that; near the limit the collector works harder instead.
const defaultRepairerMemoryLimit = 256 << 20

func runRepairer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("repairer", defaultRepairerHTTP, stderr)
	cfg := repairerFlags(c.fs)
	memLimit := memoryLimitFlag(c.fs, defaultRepairerMemoryLimit)
	return c.run(ctx, args, stderr, repairer.ServiceName, &cfg.LeaseTTL, func() error {
		if cfg.LeaseTTL <= 0 || cfg.Grace < 0 {
			return usageErrorf("--lease-ttl must be > 0 and --grace >= 0")
		}
		return nil
	}, func(store *logstore.Store, d assemble.Deps) (service, error) {
		gcpolicy.Limit(*memLimit)
		return assemble.NewRepairer(*cfg, store, d)
	})
}

// repairerFlags binds the repairer's settings to fs, defaulting to
// assemble.DefaultRepairer: the values `up` runs the repairer with (up
// has --lease-ttl and --grace of its own).
func repairerFlags(fs *flag.FlagSet) *assemble.Repairer {
	cfg := assemble.DefaultRepairer()
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "the lease TTL holders' leases are written with")
	fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "how long a lease must have expired before the session is repaired")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often every claimed session is checked (besides the lease watch)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "sessions evaluated and repaired at once")
	fs.BoolVar(&cfg.KeepApprovalsPending, "keep-approvals-pending", cfg.KeepApprovalsPending, "leave pending approvals open instead of expiring them (their turn stays open)")
	return &cfg
}
