package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/bytesize"
	"github.com/sessionlog/sessionlog/internal/gcpolicy"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

const defaultWriterHTTP = "127.0.0.1:8081"

// defaultWriterMemoryLimit is the Go heap's soft limit of a writer process
// when GOMEMLIMIT is not set. At GOGC 400 (gcpolicy.DefaultGCPercent) the heap may
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
		gcpolicy.Limit(*memLimit)
		return assemble.NewWriter(*cfg, store, d)
	})
}

// memoryLimitFlag binds --memory-limit, the Go heap's soft limit of a
// service process (gcpolicy.Limit), with default def.
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
	tenantLimitFlags(fs, &cfg)
	return &cfg
}

// tenantLimitFlags binds the writer's limits per tenant (ADR 010) to fs:
// the standalone writer's and up's.
func tenantLimitFlags(fs *flag.FlagSet, cfg *assemble.Writer) {
	fs.Float64Var(&cfg.TenantEventsPerSecond, "tenant-events-per-second", cfg.TenantEventsPerSecond, "events the agents of one tenant may append per second, a burst of as many, per writer process (0: no limit)")
	fs.Int64Var(&cfg.TenantMaxSessions, "tenant-max-sessions", cfg.TenantMaxSessions, "sessions one tenant may have: its agents' next one is refused quota_exceeded (0: no limit)")
	fs.Var((*bytesize.Size)(&cfg.TenantMaxBytes), "tenant-max-bytes", "bytes the events of one tenant's sessions may store, a `size` such as 10GiB: its agents' appends past it are refused quota_exceeded (0: no limit)")
	fs.Var(tenantBounds{cfg}, "tenant-limit", "one tenant's own bounds in place of --tenant-max-sessions and --tenant-max-bytes, and of --tenant-events-per-second when a third part gives it, `TENANT=SESSIONS:SIZE[:EVENTS_PER_SECOND]` such as acme=100:10GiB or acme=100:10GiB:500 (0: no limit; repeatable)")
}

// tenantBounds is the repeatable --tenant-limit TENANT=SESSIONS:SIZE.
type tenantBounds struct{ cfg *assemble.Writer }

func (t tenantBounds) String() string {
	if t.cfg == nil {
		return ""
	}
	var out []string
	for tenant, b := range t.cfg.TenantBounds {
		v := fmt.Sprintf("%s=%d:%s", tenant, b.Sessions, (*bytesize.Size)(&b.Bytes).String())
		if b.EventsPerSecond != nil {
			v += ":" + strconv.FormatFloat(*b.EventsPerSecond, 'g', -1, 64)
		}
		out = append(out, v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (t tenantBounds) Set(v string) error {
	tenant, bounds, ok := strings.Cut(v, "=")
	parts := strings.Split(bounds, ":")
	if !ok || len(parts) < 2 || len(parts) > 3 || tenant == "" {
		return fmt.Errorf("%q: want TENANT=SESSIONS:SIZE[:EVENTS_PER_SECOND], such as acme=100:10GiB or acme=100:10GiB:500", v)
	}
	sessions, size := parts[0], parts[1]
	var rate *float64
	if len(parts) == 3 {
		r, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return fmt.Errorf("%q: events per second %q is not a rate", v, parts[2])
		}
		rate = &r
	}
	n, err := strconv.ParseInt(sessions, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q: sessions %q is not a count", v, sessions)
	}
	var b bytesize.Size
	if err := b.Set(size); err != nil {
		return err
	}
	if _, dup := t.cfg.TenantBounds[tenant]; dup {
		return fmt.Errorf("tenant %s has a --tenant-limit already", tenant)
	}
	if t.cfg.TenantBounds == nil {
		t.cfg.TenantBounds = map[string]logstore.TenantBound{}
	}
	t.cfg.TenantBounds[tenant] = logstore.TenantBound{Sessions: n, Bytes: int64(b), EventsPerSecond: rate}
	return nil
}
