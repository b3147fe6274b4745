package repairer

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	repaired   *prometheus.CounterVec // by trigger
	closers    *prometheus.CounterVec // by kind
	latency    prometheus.Histogram
	lost       prometheus.Counter
	duplicates prometheus.Counter
	checks     *prometheus.CounterVec // by outcome
	errors     prometheus.Counter
	queue      prometheus.GaugeFunc
	// groups: sessions per committed grouped batch.
	groups         prometheus.Histogram
	groupFallbacks *prometheus.CounterVec // by reason
	// outages: periods this replica saw the log unable to take writes.
	outages prometheus.Counter
	// slowProbes: probes that ran out of time while the log answered this
	// replica's own reads and writes (not counted as outages).
	slowProbes prometheus.Counter
	// folded: stored events read and folded for a state not cached;
	// snapLoads: snapshots read for one, by result (used, ignored).
	folded    prometheus.Counter
	snapLoads *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, queueLen func() float64) (*metrics, error) {
	m := &metrics{
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_repairer_sessions_repaired_total",
			Help: "Repairs this replica committed, by trigger (lease_expiry, sweep, demand).",
		}, []string{"trigger"}),
		closers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_repairer_closers_total",
			Help: "Closing events committed, by the kind of item closed (attempt, tool_requested, tool_started, approval, job, compaction, step, turn).",
		}, []string{"kind"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sessionlog_repairer_expiry_to_repair_seconds",
			Help:    "Time from a lease's expiry to its committed repair (includes the grace period).",
			Buckets: []float64{.1, .25, .5, 1, 2, 3, 5, 7.5, 10, 15, 30, 60, 120, 300},
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_repairer_lost_to_holder_total",
			Help: "Repairs that lost the per-subject sequence check because the session was appended to after it was read (usually its holder came back).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_repairer_duplicates_total",
			Help: "Repairs another replica (or an earlier attempt) had already committed.",
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_repairer_checks_total",
			Help: "Sessions evaluated, by outcome.",
		}, []string{"outcome"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_repairer_errors_total",
			Help: "Evaluations that failed (retried later).",
		}),
		queue: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sessionlog_repairer_queue_length",
			Help: "Sessions waiting to be evaluated.",
		}, queueLen),
		groups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sessionlog_repairer_group_sessions",
			Help:    "Sessions per committed grouped batch (repairs ready at once committed in one atomic batch).",
			Buckets: []float64{2, 4, 8, 16, 32, 64, 128, 256},
		}),
		groupFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_repairer_group_fallbacks_total",
			Help: "Grouped batches whose sessions were appended one by one instead, by reason (refused: a session's check or a duplicate failed it; unknown: no answer).",
		}, []string{"reason"}),
		outages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_repairer_outages_total",
			Help: "Periods this replica saw the log unable to take writes (leases that lapse in one get their TTL again from its end).",
		}),
		slowProbes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_repairer_slow_probes_total",
			Help: "Writability probes that got no answer in time while the log answered this replica's own reads and writes (not counted as outages).",
		}),
		folded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_repairer_fold_events_total",
			Help: "Stored events read and folded for a session's state (after the cached state, or after its snapshot when it has one).",
		}),
		snapLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_repairer_snapshot_loads_total",
			Help: "Snapshots read for a session's state not cached, by result (used; ignored: it did not match the log or did not read, and the session was folded from its start).",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.repaired, m.closers, m.latency, m.lost, m.duplicates, m.checks, m.errors, m.queue, m.groups, m.groupFallbacks, m.outages, m.slowProbes, m.folded, m.snapLoads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
