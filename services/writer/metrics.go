package writer

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	appends     *prometheus.CounterVec // outcome, code
	events      prometheus.Counter
	latency     prometheus.Histogram
	retries     prometheus.Counter
	renewals    *prometheus.CounterVec // result
	cache       *prometheus.CounterVec // result
	heartbeats  *prometheus.CounterVec // code
	inflight    prometheus.Gauge
	cachedState prometheus.GaugeFunc
	folded      prometheus.Counter
	snapshots   *prometheus.CounterVec // result
	snapLoads   *prometheus.CounterVec // result
}

func newMetrics(reg prometheus.Registerer, cacheLen func() float64) (*metrics, error) {
	m := &metrics{
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_appends_total",
			Help: "Append requests answered, by outcome (committed, duplicate, refused, unknown) and contract code.",
		}, []string{"outcome", "code"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_writer_events_appended_total",
			Help: "Events stored by committed appends (duplicates not counted).",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sessionlog_writer_append_duration_seconds",
			Help:    "Time from receiving an append request to sending its reply.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_writer_append_conflict_retries_total",
			Help: "Appends without expectedSeq retried after another writer moved the session's tail.",
		}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_lease_renewals_total",
			Help: "Lease renewals in SESSION_LEASES, by result (ok, error).",
		}, []string{"result"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_state_cache_total",
			Help: "Session state lookups, by result (hit, miss).",
		}, []string{"result"}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_heartbeats_total",
			Help: "Heartbeat requests answered, by code (ok or a contract code).",
		}, []string{"code"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessionlog_writer_inflight_requests",
			Help: "Requests being handled.",
		}),
		cachedState: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sessionlog_writer_state_cache_sessions",
			Help: "Sessions whose state is cached.",
		}, cacheLen),
		folded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_writer_fold_events_total",
			Help: "Stored events read and folded to load a session's state that was not cached (after its snapshot, when it has one).",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_snapshots_total",
			Help: "Snapshots of sessions' state written to SESSION_SNAPSHOTS, by result (ok, error).",
		}, []string{"result"}),
		snapLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_snapshot_loads_total",
			Help: "Snapshots read to load a session's state, by result (used; ignored: it did not match the log or did not read, and the session was folded from its start).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.appends, m.events, m.latency, m.retries, m.renewals, m.cache, m.heartbeats, m.inflight, m.cachedState, m.folded, m.snapshots, m.snapLoads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
