package writer

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// tenantQuotas bounds the events each tenant's agents append per second
// (Config.TenantEventsPerSecond, or the tenant's own in
// Config.TenantBounds): a token bucket per tenant, as deep as one second's
// events, filled by the clock (Config.Now). It counts every tenant's
// appended events for the operator (sessionlog_writer_tenant_events_total).
type tenantQuotas struct {
	limits  logstore.TenantLimits // RateOf: 0, no bound
	now     func() time.Time
	events  *prometheus.CounterVec // tenant, result
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newTenantQuotas(limits logstore.TenantLimits, now func() time.Time, reg prometheus.Registerer) (*tenantQuotas, error) {
	q := &tenantQuotas{limits: limits, now: now, buckets: map[string]*bucket{},
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_tenant_events_total",
			Help: "Events agents asked to append, by tenant (NATS account) and result (stored, or quota_exceeded); an operator's are not counted.",
		}, []string{"tenant", "result"})}
	if err := reg.Register(q.events); err != nil {
		return nil, err
	}
	return q, nil
}

// take spends n events of tenant's second, or refuses them all.
func (q *tenantQuotas) take(tenant string, n int) error {
	rate := q.limits.RateOf(tenant)
	if rate <= 0 {
		return nil
	}
	now := q.now()
	q.mu.Lock()
	b := q.buckets[tenant]
	if b == nil {
		b = &bucket{tokens: rate, at: now}
		q.buckets[tenant] = b
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(rate, b.tokens+d.Seconds()*rate)
	}
	b.at = now
	ok := float64(n) <= b.tokens
	if ok {
		b.tokens -= float64(n)
	}
	q.mu.Unlock()
	if !ok {
		q.events.WithLabelValues(tenant, string(schema.CodeQuotaExceeded)).Add(float64(n))
		return schema.Errorf(schema.CodeQuotaExceeded, "tenant %s appends more than %g events per second (%s): nothing stored, retry later", tenant, rate, q.limits.RateFlagOf(tenant))
	}
	return nil
}

// stored counts n events of tenant appended.
func (q *tenantQuotas) stored(tenant string, n int) {
	q.events.WithLabelValues(tenant, "stored").Add(float64(n))
}
