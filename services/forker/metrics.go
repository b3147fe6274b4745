package forker

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	forks     *prometheus.CounterVec // code: ok or a contract code
	events    prometheus.Counter
	duration  prometheus.Histogram
	recovered *prometheus.CounterVec // action
	inflight  prometheus.Gauge
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
	}
	for _, c := range []prometheus.Collector{m.forks, m.events, m.duration, m.recovered, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
