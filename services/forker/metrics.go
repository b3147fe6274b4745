package forker

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	forks     *prometheus.CounterVec // code: ok or a contract code
	events    prometheus.Counter
	duration  prometheus.Histogram
	recovered *prometheus.CounterVec // action
	inflight  prometheus.Gauge
	// scanned: parent events the scans folded; snapLoads: parents'
	// snapshots read, by result (used, past_cut, ignored).
	scanned   prometheus.Counter
	snapLoads *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		forks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_forker_forks_total",
			Help: "Fork requests answered, by code (ok or a contract code).",
		}, []string{"code"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_forker_events_copied_total",
			Help: "Events written into fork children (created, copies, committed).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sessionlog_forker_fork_duration_seconds",
			Help:    "Time to scan the parent and write a child, for forks that committed.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_forker_recovered_total",
			Help: "Copies left behind by a forker that was gone, by action (finished, abandoned, dropped).",
		}, []string{"action"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessionlog_forker_inflight_copies",
			Help: "Fork copies being written by this process.",
		}),
		scanned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionlog_forker_scan_events_total",
			Help: "Parent events read and folded to resolve fork cuts (after the parent's snapshot, when it has one; the copy reads the events it copies).",
		}),
		snapLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_forker_snapshot_loads_total",
			Help: "Parents' snapshots read to resolve a cut, by result (used; past_cut: the cut is a seq before it; ignored: it did not match the log or did not read; the parent was then scanned from its start).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.forks, m.events, m.duration, m.recovered, m.inflight, m.scanned, m.snapLoads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
