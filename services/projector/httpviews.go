package projector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// newHTTP makes the HTTP side of s, reading the log through log.
func newHTTP(s *Service, log httpapi.Log) (*httpapi.Server, error) {
	c := s.cfg
	return httpapi.New(httpapi.Config{
		Views: httpViews{s}, Log: log, Conn: c.Conn, Operator: c.Operator,
		Logger: c.Logger, Registerer: c.Registerer, Gatherer: c.Gatherer, Now: c.Now,
		HTTPToken: c.HTTPToken, TenantTokens: c.TenantTokens, Heartbeat: c.Heartbeat, Watch: c.Watch,
	})
}

// httpViews is the projector as the HTTP side sees it (httpapi.Views).
type httpViews struct{ s *Service }

var _ httpapi.Views = httpViews{}

func (v httpViews) View(fn func(store.Snapshot) error) error {
	s := v.s
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed.Load() {
		return httpapi.ErrClosed
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	return fn(snap)
}

func (v httpViews) SetInternals(kvs [][2][]byte) error {
	s := v.s
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed.Load() {
		return httpapi.ErrClosed
	}
	return s.db.SetInternals(kvs)
}

func (v httpViews) Ready() error       { return v.s.Ready() }
func (v httpViews) RolledBack() string { return v.s.rb.reason() }

func (v httpViews) Folded() (applied, repairs, lag float64) {
	m := v.s.met
	return metricValue(m.applied), metricValue(m.repairs), metricValue(m.lag)
}

func (v httpViews) Erased(id string) bool { return v.s.er.has(id) }
func (v httpViews) WatchErased(id string, cancel *context.CancelFunc) bool {
	return v.s.er.watching(id, cancel)
}
func (v httpViews) UnwatchErased(id string, cancel *context.CancelFunc) { v.s.er.unwatch(id, cancel) }

func (v httpViews) Terms(q string) []string { return terms(nil, q) }
func (v httpViews) EventText(id string, ev *schema.Envelope) string {
	return searchText(id, ev)
}

func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}
