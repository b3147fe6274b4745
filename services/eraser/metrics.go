package eraser

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// shredCounter is a Log that counts what its shreds did (logstore.Store).
type shredCounter interface {
	ShredCounts() logstore.ShredCounts
}

// shredMetrics are the eraser's: what the shreds of sessions with sealed
// bodies did (DESIGN.md section 14), read from the store when scraped
// (zero for a Log that does not count them).
type shredMetrics struct {
	st                         shredCounter
	purges, fallBacks, deletes *prometheus.Desc
}

func newMetrics(reg prometheus.Registerer, st Log) (*shredMetrics, error) {
	m := &shredMetrics{
		purges: prometheus.NewDesc("sessionlog_eraser_purges_total",
			"Purges of an erased session's subject (sealed bodies, its key destroyed), by result (done; refused: the NATS user may not purge, the job falls back to secure deletes; error: the job goes on later).",
			[]string{"result"}, nil),
		fallBacks: prometheus.NewDesc("sessionlog_eraser_purge_fallbacks_total",
			"Erase jobs that, refused the purge, securely deleted the session's sealed events one at a time instead, by result (done; cut: an error or the job stopped, and the job resumed does it again).",
			[]string{"result"}, nil),
		deletes: prometheus.NewDesc("sessionlog_eraser_fallback_secure_deletes_total",
			"Secure deletes of sealed events made by the fall backs after a refused purge (a message already gone, on a resumed job, counts too).",
			nil, nil),
	}
	m.st, _ = st.(shredCounter)
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Describe and Collect make the metrics a prometheus.Collector.
func (m *shredMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.purges
	ch <- m.fallBacks
	ch <- m.deletes
}

func (m *shredMetrics) Collect(ch chan<- prometheus.Metric) {
	var c logstore.ShredCounts
	if m.st != nil {
		c = m.st.ShredCounts()
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(m.purges, c.Purged, "done")
	counter(m.purges, c.PurgesRefused, "refused")
	counter(m.purges, c.PurgeErrors, "error")
	counter(m.fallBacks, c.FallBacksDone, "done")
	counter(m.fallBacks, c.FallBacksCut, "cut")
	counter(m.deletes, c.FallBackDeletes)
}
