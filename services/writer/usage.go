package writer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// usageFlushBytes is a tenant's bytes counted and not yet flushed that
// make the writer flush at once rather than at its next tick.
const usageFlushBytes = 1 << 20

// tenantUsage keeps each tenant's sessions and stored bytes (ADR 010,
// "Per-tenant limits") and bounds them for the tenant's agents
// (Config.TenantMaxSessions, TenantMaxBytes). The bucket TENANT_USAGE is
// the source of truth, shared by every writer: a session an agent creates
// under a bound is counted there by compare-and-set before it is stored
// (exact whatever the writers); the bytes of every append, and the
// sessions created without a bound, are counted here and added to the
// bucket by compare-and-set every UsageFlush (or at once past
// usageFlushBytes), so an append pays no round trip for them. Every
// writer watches the bucket: what it judges by is the bucket's value plus
// what it counted and has not flushed.
type tenantUsage struct {
	st       *logstore.Store
	limits   logstore.TenantLimits
	every    time.Duration
	mu       sync.Mutex
	known    map[string]usageRecord          // from the bucket
	pending  map[string]logstore.TenantUsage // counted here, not flushed
	flushing map[string]logstore.TenantUsage // being added to the bucket
	kick     chan struct{}
	sessions *prometheus.Desc
	bytes    *prometheus.Desc
}

type usageRecord struct {
	logstore.TenantUsage
	rev uint64
}

func newTenantUsage(cfg Config, reg prometheus.Registerer) (*tenantUsage, error) {
	u := &tenantUsage{st: cfg.Store, limits: cfg.limits(), every: cfg.UsageFlush,
		known: map[string]usageRecord{}, pending: map[string]logstore.TenantUsage{}, flushing: map[string]logstore.TenantUsage{}, kick: make(chan struct{}, 1),
		sessions: prometheus.NewDesc("sessionlog_writer_tenant_sessions",
			"Sessions of each tenant (NATS account) as this writer knows them: TENANT_USAGE plus what it counted and has not added to it yet.", []string{"tenant"}, nil),
		bytes: prometheus.NewDesc("sessionlog_writer_tenant_bytes",
			"Stored bytes (event bodies) of each tenant's sessions as this writer knows them: TENANT_USAGE plus what it counted and has not added to it yet.", []string{"tenant"}, nil),
	}
	return u, reg.Register(u)
}

// Describe and Collect make the usage a prometheus.Collector: the gauges
// are read at a scrape, never set by an append.
func (u *tenantUsage) Describe(ch chan<- *prometheus.Desc) { ch <- u.sessions; ch <- u.bytes }

func (u *tenantUsage) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	all := make(map[string]logstore.TenantUsage, len(u.known))
	for t := range u.known {
		all[t] = u.usageLocked(t)
	}
	for t := range u.pending {
		all[t] = u.usageLocked(t)
	}
	u.mu.Unlock()
	for t, v := range all {
		ch <- prometheus.MustNewConstMetric(u.sessions, prometheus.GaugeValue, float64(v.Sessions), t)
		ch <- prometheus.MustNewConstMetric(u.bytes, prometheus.GaugeValue, float64(v.Bytes), t)
	}
}

// usageLocked is the tenant's usage as this writer judges it.
func (u *tenantUsage) usageLocked(tenant string) logstore.TenantUsage {
	return u.known[tenant].TenantUsage.Add(u.localLocked(tenant))
}

// localLocked is what this writer counted for tenant that the bucket may
// not hold yet.
func (u *tenantUsage) localLocked(tenant string) logstore.TenantUsage {
	p, f := u.pending[tenant], u.flushing[tenant]
	return logstore.TenantUsage{Sessions: p.Sessions + f.Sessions, Bytes: p.Bytes + f.Bytes}
}

// checkBytes refuses an agent's append of n bytes that would take its
// tenant's stored bytes past the bound.
func (u *tenantUsage) checkBytes(tenant string, n int) error {
	bound := u.limits.For(tenant).Bytes
	if bound <= 0 {
		return nil
	}
	u.mu.Lock()
	cur := u.usageLocked(tenant).Bytes
	u.mu.Unlock()
	if cur+int64(n) > bound {
		return schema.Errorf(schema.CodeQuotaExceeded, "tenant %s stores %d bytes, its bound is %d (%s): an append of %d bytes is refused, nothing stored; erase sessions to make room",
			tenant, cur, bound, u.limits.FlagOf(tenant, "--tenant-max-bytes"), n)
	}
	return nil
}

// reserveSession counts a session an agent of tenant is about to create,
// in the bucket by compare-and-set, or refuses it past the bound. Without
// a bound it does nothing (the session is counted when stored).
func (u *tenantUsage) reserveSession(ctx context.Context, tenant string) (bool, error) {
	u.mu.Lock()
	local := u.localLocked(tenant).Sessions
	u.mu.Unlock()
	reserved, got, rev, err := u.st.ReserveSession(ctx, u.limits, tenant, local)
	if reserved {
		u.learn(tenant, got, rev, false)
	}
	return reserved, err
}

// count adds what was stored for tenant (sessions created that were not
// reserved, a reservation given back as -1, bytes) to what this writer
// flushes.
func (u *tenantUsage) count(tenant string, sessions int64, bytes int) {
	u.mu.Lock()
	p := u.pending[tenant]
	p.Sessions += sessions
	p.Bytes += int64(bytes)
	u.pending[tenant] = p
	big := p.Bytes >= usageFlushBytes
	u.mu.Unlock()
	if big {
		select {
		case u.kick <- struct{}{}:
		default:
		}
	}
}

// learn keeps a value of the bucket newer than the one known; flushed:
// the value holds what this writer was flushing for tenant.
func (u *tenantUsage) learn(tenant string, v logstore.TenantUsage, rev uint64, flushed bool) {
	u.mu.Lock()
	if rev > u.known[tenant].rev {
		u.known[tenant] = usageRecord{v, rev}
	}
	if flushed {
		delete(u.flushing, tenant)
	}
	u.mu.Unlock()
}

// start records the writer's limits for the operator's view (sessionlog
// tenants), loads the bucket's values and watches it until ctx ends.
func (u *tenantUsage) start(ctx context.Context) error {
	if err := u.st.PutUsageLimits(ctx, u.limits); err != nil {
		return err
	}
	return u.st.WatchUsage(ctx, func(tenant string, v logstore.TenantUsage, rev uint64) {
		u.learn(tenant, v, rev, false)
	}, false)
}

// run flushes every interval, when kicked, and once more when ctx ends
// (on a context of its own, so that a writer stopping keeps its count).
func (u *tenantUsage) run(ctx context.Context) {
	t := time.NewTicker(u.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = u.flush(fctx)
			cancel()
			return
		case <-t.C:
		case <-u.kick:
		}
		_ = u.flush(ctx)
	}
}

// flush adds what was counted to the bucket; what could not be added is
// kept for the next flush.
func (u *tenantUsage) flush(ctx context.Context) error {
	u.mu.Lock()
	out := u.pending
	u.pending = make(map[string]logstore.TenantUsage, len(out))
	for t, d := range out {
		u.flushing[t] = d
	}
	u.mu.Unlock()
	var errs []error
	for tenant, d := range out {
		if d == (logstore.TenantUsage{}) {
			u.learn(tenant, logstore.TenantUsage{}, 0, true)
			continue
		}
		got, rev, err := u.st.AddUsage(ctx, tenant, d, nil)
		if err != nil {
			u.mu.Lock()
			delete(u.flushing, tenant)
			u.mu.Unlock()
			u.count(tenant, d.Sessions, int(d.Bytes))
			errs = append(errs, err)
			continue
		}
		u.learn(tenant, got, rev, true)
	}
	return errors.Join(errs...)
}
