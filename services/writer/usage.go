package writer

import (
	"context"
	"sync"

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
// sessions created without a bound, are counted by a
// logstore.UsageCounter, which adds them to the bucket by compare-and-set
// every UsageFlush (or at once past usageFlushBytes), so an append pays
// no round trip for them. Every writer watches the bucket: what it judges
// by is the bucket's value plus what it counted and has not flushed.
type tenantUsage struct {
	st       *logstore.Store
	limits   logstore.TenantLimits
	counter  *logstore.UsageCounter
	mu       sync.Mutex
	known    map[string]usageRecord // from the bucket
	sessions *prometheus.Desc
	bytes    *prometheus.Desc
}

type usageRecord struct {
	logstore.TenantUsage
	rev uint64
}

func newTenantUsage(cfg Config, reg prometheus.Registerer) (*tenantUsage, error) {
	u := &tenantUsage{st: cfg.Store, limits: cfg.limits(), known: map[string]usageRecord{},
		sessions: prometheus.NewDesc("sessionlog_writer_tenant_sessions",
			"Sessions of each tenant (NATS account) as this writer knows them: TENANT_USAGE plus what it counted and has not added to it yet.", []string{"tenant"}, nil),
		bytes: prometheus.NewDesc("sessionlog_writer_tenant_bytes",
			"Stored bytes (event bodies) of each tenant's sessions as this writer knows them: TENANT_USAGE plus what it counted and has not added to it yet.", []string{"tenant"}, nil),
	}
	// Counts wait for run's flushes from the first request on; each flush
	// that lands tells known the bucket's value after it, before the
	// counter stops holding it as its own.
	u.counter = logstore.NewUsageCounterWith(cfg.Store, logstore.UsageCounterOptions{Every: cfg.UsageFlush, FlushBytes: usageFlushBytes, Deferred: true,
		Added: func(tenant string, v logstore.TenantUsage, rev uint64) { u.learn(tenant, v, rev) }})
	return u, reg.Register(u)
}

// Describe and Collect make the usage a prometheus.Collector: the gauges
// are read at a scrape, never set by an append.
func (u *tenantUsage) Describe(ch chan<- *prometheus.Desc) { ch <- u.sessions; ch <- u.bytes }

func (u *tenantUsage) Collect(ch chan<- prometheus.Metric) {
	tenants := u.counter.Tenants()
	u.mu.Lock()
	for t := range u.known {
		tenants = append(tenants, t)
	}
	u.mu.Unlock()
	all := make(map[string]logstore.TenantUsage, len(tenants))
	for _, t := range tenants {
		all[t] = u.usage(t)
	}
	for t, v := range all {
		ch <- prometheus.MustNewConstMetric(u.sessions, prometheus.GaugeValue, float64(v.Sessions), t)
		ch <- prometheus.MustNewConstMetric(u.bytes, prometheus.GaugeValue, float64(v.Bytes), t)
	}
}

// usage is the tenant's usage as this writer judges it: what it counted
// and the bucket may not hold yet, read first, plus the bucket's value
// (a flush that lands between the two reads is then counted twice for a
// moment, never missed: the counter reports the value after it before it
// drops the flushed count).
func (u *tenantUsage) usage(tenant string) logstore.TenantUsage {
	local := u.counter.Local(tenant)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.known[tenant].TenantUsage.Add(local)
}

// checkBytes refuses an agent's append of n bytes that would take its
// tenant's stored bytes past the bound.
func (u *tenantUsage) checkBytes(tenant string, n int) error {
	bound := u.limits.For(tenant).Bytes
	if bound <= 0 {
		return nil
	}
	cur := u.usage(tenant).Bytes
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
	reserved, got, rev, err := u.st.ReserveSession(ctx, u.limits, tenant, u.counter.Local(tenant).Sessions)
	if reserved {
		u.learn(tenant, got, rev)
	}
	return reserved, err
}

// count adds what was stored for tenant (sessions created that were not
// reserved, a reservation given back as -1, bytes) to what this writer
// flushes.
func (u *tenantUsage) count(tenant string, sessions int64, bytes int) {
	u.counter.Count(tenant, logstore.TenantUsage{Sessions: sessions, Bytes: int64(bytes)})
}

// learn keeps a value of the bucket newer than the one known.
func (u *tenantUsage) learn(tenant string, v logstore.TenantUsage, rev uint64) {
	u.mu.Lock()
	if rev > u.known[tenant].rev {
		u.known[tenant] = usageRecord{v, rev}
	}
	u.mu.Unlock()
}

// start records the writer's limits for the operator's view (sessionlog
// tenants), loads the bucket's values and watches it until ctx ends.
func (u *tenantUsage) start(ctx context.Context) error {
	if err := u.st.PutUsageLimits(ctx, u.limits); err != nil {
		return err
	}
	return u.st.WatchUsage(ctx, u.learn, false)
}

// run flushes every interval, at once past usageFlushBytes, and once more
// when ctx ends (on a context of its own, so that a writer stopping keeps
// its count).
func (u *tenantUsage) run(ctx context.Context) { u.counter.Run(ctx) }
