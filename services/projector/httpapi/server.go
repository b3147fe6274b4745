// Package httpapi is the projector's HTTP side: the API (lists, details,
// events, context, search, tree, audit, overview), the watch (SSE) and
// ACP streams, exports, the dashboard and its actions. It reads the views
// through the small interface it declares, Views, which the projector
// satisfies, and the log through the one it declares, Log (LogOf makes
// one of the projector's *logstore.Store); it writes nothing but the
// audit index a tenant's request brings up to date (Views.SetInternals).
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Views is what the HTTP side needs of the projector.
type Views interface {
	// View runs fn on a consistent snapshot of the views; ErrClosed once
	// the projector stopped.
	View(fn func(store.Snapshot) error) error
	// SetInternals writes internal keys (store.DB.SetInternals: the audit
	// index); ErrClosed once the projector stopped.
	SetInternals(kvs [][2][]byte) error
	// Ready is nil when the projector is ready (/readyz).
	Ready() error
	// RolledBack is why the log rolled back, "" if it did not.
	RolledBack() string
	// Folded is what the fleet overview samples: events and repairs
	// folded so far, and stream messages not yet folded.
	Folded() (applied, repairs, lag float64)
	// Erased reports whether session id was erased. WatchErased
	// registers an open stream of id that cancel ends when it is erased,
	// and returns false (registering nothing) when it is already;
	// UnwatchErased takes it off.
	Erased(id string) bool
	WatchErased(id string, cancel *context.CancelFunc) bool
	UnwatchErased(id string, cancel *context.CancelFunc)
	// Terms cuts a query into the terms the search index holds, as the
	// fold cuts the text it indexes; EventText is the text of an event
	// the index holds (a hit's snippet is cut from it).
	Terms(q string) []string
	EventText(id string, ev *schema.Envelope) string
}

// defaultFleetEvery is Config.FleetEvery's default; a variable only so
// that tests need not wait minutes for a history (SetFleetEvery).
var defaultFleetEvery = 10 * time.Second

// Config configures the HTTP side: the projector's Config, its defaults
// filled in (projector.DefaultConfig), gives each field its value.
type Config struct {
	Views Views
	// Log is the log the projector folds (LogOf of its Config.Store).
	Log Log
	// Conn carries the dashboard's actions; Operator its erase.
	Conn       *nats.Conn
	Operator   *nats.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on /metrics by Handler.
	Gatherer     prometheus.Gatherer
	Now          func() time.Time
	HTTPToken    string
	TenantTokens map[string]string
	// Heartbeat is the SSE comment interval.
	Heartbeat time.Duration
	// Watch: zero fields take DefaultWatchLimits' values.
	Watch WatchLimits
	// FleetEvery is the overview's sampling interval (zero: 10s).
	FleetEvery time.Duration
	// SearchScanBudget bounds the sessions one search request examines
	// (zero: 20,000).
	SearchScanBudget int
}

// Server serves the projector's HTTP side.
type Server struct {
	cfg Config
	log *slog.Logger
	ls  Log
	v   Views
	met *metrics

	// watch is what the watch streams share: limits, queued bytes, metrics.
	watch *watchHub
	// agentExports admits four exports to an agent's format at a time:
	// each holds the session's fold (a map slot for each ended turn and
	// tool call: 9.3 MiB at a million events) and its pages.
	agentExports chan struct{}
	// fleet is the overview's recent history (overview.go).
	fleet *fleetHistory
	// auditMu: one indexAudit at a time (audit.go).
	auditMu sync.Mutex
	handler http.Handler
	api     http.Handler
}

type metrics struct {
	watchers prometheus.Gauge
	cut      prometheus.Counter
	// listReads: what the pages of /v1/sessions read (store.ListReads).
	listReads *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionlog_projector_watchers", Help: "Open watch (SSE) streams."}),
		cut: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessionlog_projector_answers_cut_total",
			Help: "Streamed answers (/context, /events, /export) cut short after they began: the client read nothing for the write timeout or went away, or the read failed."}),
		listReads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessionlog_projector_list_reads_total",
			Help: "What the pages of /v1/sessions read, by kind: index entries (index) and session summaries (summary)."}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.watchers, m.cut, m.listReads} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("projector: metrics: %w", err)
		}
	}
	return m, nil
}

// New makes the HTTP side over cfg.Views, registering its metrics.
func New(cfg Config) (*Server, error) {
	if cfg.Views == nil || cfg.Log == nil || cfg.Logger == nil || cfg.Registerer == nil || cfg.Now == nil || cfg.Heartbeat <= 0 {
		return nil, errors.New("httpapi: Config.Views, Log, Logger, Registerer, Now and Heartbeat are required")
	}
	if cfg.FleetEvery <= 0 {
		cfg.FleetEvery = defaultFleetEvery
	}
	if cfg.SearchScanBudget <= 0 {
		cfg.SearchScanBudget = defaultSearchScanBudget
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	hub, err := newWatchHub(cfg.Watch, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ls: cfg.Log, v: cfg.Views, met: met, watch: hub,
		agentExports: make(chan struct{}, 4), fleet: newFleetHistory(cfg.FleetEvery)}
	s.handler = s.routes(true)
	s.api = s.routes(false)
	return s, nil
}

// Handler serves the HTTP API, the dashboard, /healthz, /readyz and (with
// a Gatherer) /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// Landed is told each batch of views that landed: a watch reads a
// session's owner and grants again only after one did.
func (s *Server) Landed() { s.watch.commits.Add(1) }

// Run samples the fleet overview until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.fleet.every)
	defer t.Stop()
	for ctx.Err() == nil {
		s.sample(s.cfg.Now())
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}
