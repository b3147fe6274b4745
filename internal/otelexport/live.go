package otelexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Defaults of live export.
const (
	DefaultQueueTurns    = 1024
	DefaultExportTimeout = 10 * time.Second
	// maxTracked bounds the sessions whose next trace's start Live
	// remembers; past it it forgets them all, and their next turns are
	// found by reading the session from its start.
	maxTracked = 1 << 16
)

// NewOTLPHTTP is the OTLP/HTTP (protobuf) exporter of endpoint: a base URL
// (http://collector:4318, traces go to its /v1/traces) or the full traces
// URL. Each export gives up after timeout, retries included.
func NewOTLPHTTP(ctx context.Context, endpoint string, timeout time.Duration) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp endpoint must be an http(s) URL, got %q", endpoint)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	if timeout <= 0 {
		timeout = DefaultExportTimeout
	}
	return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()), otlptracehttp.WithTimeout(timeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: timeout}))
}

// LiveConfig configures live export.
type LiveConfig struct {
	// Exporter sends the spans (NewOTLPHTTP).
	Exporter sdktrace.SpanExporter
	// Store reads a turn's events from the log when it ends.
	Store      *logstore.Store
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// QueueTurns bounds the turns waiting for export; past it a turn that
	// ends is dropped and counted (default DefaultQueueTurns).
	QueueTurns int
	// Timeout bounds one turn's export (default DefaultExportTimeout).
	Timeout time.Duration
}

// Live exports each turn as it ends: it sees the projector's events
// (projector.Observer) and queues the turns that end; one worker reads
// each turn's events from the log, builds its trace and sends it. The
// projector never waits for it: a collector that is slow or down fills
// the queue, and turns that end then are dropped and counted in
// sessionlog_otlp_turns_dropped_total (`sessionlog export --to otlp`
// sends them again, with the same ids).
type Live struct {
	cfg LiveConfig
	log *slog.Logger
	q   chan liveTurn
	// from: per session with a turn under way, the stream seq after which
	// its events start (the previous turn's end, or the turn's start).
	// Observe alone uses it, from the projector's fold loop.
	from map[string]uint64

	dropped  *prometheus.CounterVec
	exported prometheus.Counter
	queued   prometheus.GaugeFunc
}

type liveTurn struct {
	session string
	turnID  string
	// from, known: read after this stream seq (else the whole session);
	// through: the stream seq of its turn/ended.
	from    uint64
	known   bool
	through uint64
}

// NewLive builds a live exporter; Run sends what it queues.
func NewLive(cfg LiveConfig) (*Live, error) {
	if cfg.Exporter == nil || cfg.Store == nil {
		return nil, errors.New("otelexport: live export needs an exporter and a store")
	}
	if cfg.QueueTurns <= 0 {
		cfg.QueueTurns = DefaultQueueTurns
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultExportTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	l := &Live{cfg: cfg, log: cfg.Logger, q: make(chan liveTurn, cfg.QueueTurns), from: map[string]uint64{},
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessionlog_otlp_turns_dropped_total",
			Help: "Turns not exported live, by reason (queue_full: the export queue was full; export_failed: the collector did not take them; unreadable: the turn's events could not be read)."}, []string{"reason"}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessionlog_otlp_turns_exported_total", Help: "Turns exported live as traces."}),
	}
	l.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionlog_otlp_queue_turns", Help: "Turns waiting for live export."},
		func() float64 { return float64(len(l.q)) })
	for _, c := range []prometheus.Collector{l.dropped, l.exported, l.queued} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("otelexport: metrics: %w", err)
		}
	}
	return l, nil
}

// Observe sees one folded event; it never blocks.
func (l *Live) Observe(ev *schema.Envelope, streamSeq uint64) {
	if len(l.from) >= maxTracked {
		clear(l.from)
	}
	switch ev.Type {
	case schema.TypeTurnStarted:
		if _, ok := l.from[ev.SessionID]; !ok {
			l.from[ev.SessionID] = streamSeq - 1
		}
	case schema.TypeTurnEnded:
		from, known := l.from[ev.SessionID]
		// The next turn's trace takes what comes between the two.
		l.from[ev.SessionID] = streamSeq
		select {
		case l.q <- liveTurn{session: ev.SessionID, turnID: ev.TurnID, from: from, known: known, through: streamSeq}:
		default:
			l.dropped.WithLabelValues("queue_full").Inc()
		}
	case schema.TypeSessionClosed:
		delete(l.from, ev.SessionID)
	}
}

// Run exports queued turns until ctx ends, then shuts the exporter down.
func (l *Live) Run(ctx context.Context) error {
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.cfg.Exporter.Shutdown(sctx)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case t := <-l.q:
			l.export(ctx, t)
		}
	}
}

func (l *Live) export(ctx context.Context, t liveTurn) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	evs, err := l.read(ctx, t)
	if err != nil {
		l.dropped.WithLabelValues("unreadable").Inc()
		l.log.Warn("otlp: read turn", "session", t.session, "turn", t.turnID, "err", err)
		return
	}
	if _, _, err := Export(ctx, l.cfg.Exporter, evs); err != nil {
		l.dropped.WithLabelValues("export_failed").Inc()
		l.log.Warn("otlp: export turn", "session", t.session, "turn", t.turnID, "err", err)
		return
	}
	l.exported.Inc()
}

// read returns the events of turn t: those after the previous turn's end
// (events between turns go to the next turn's trace) through its
// turn/ended. They are read through the judge (logstore.Judge), from the
// session's event stored last at or before the previous turn's end (the
// projector judged the session up to there), so a message changed,
// missing or moved since is found, and the turn is not exported.
func (l *Live) read(ctx context.Context, t liveTurn) ([]schema.Envelope, error) {
	var evs []schema.Envelope
	from := uint64(0)
	if t.known {
		from = t.from
	}
	j, err := l.cfg.Store.JudgeAfter(ctx, t.session, from)
	if err != nil {
		return nil, err
	}
	_, err = l.cfg.Store.ReadJudged(ctx, &j, func(m *logstore.Msg, ev *schema.Envelope) error {
		if m.StreamSeq > t.through {
			return logstore.ErrStop
		}
		if m.StreamSeq > from {
			evs = append(evs, *ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Read from the start: keep what follows the previous turn's end.
	var created *schema.Envelope
	if len(evs) > 0 && evs[0].Type == schema.TypeSessionCreated {
		created = &evs[0]
	}
	if !t.known {
		for i := len(evs) - 2; i >= 0; i-- {
			if evs[i].Type == schema.TypeTurnEnded {
				evs = evs[i+1:]
				break
			}
		}
	}
	if len(evs) > 0 && evs[0].Type != schema.TypeSessionCreated {
		// The session's first event names its agent, as in an export of
		// the whole session.
		if created == nil {
			if created, err = l.first(ctx, t.session); err != nil {
				return nil, err
			}
		}
		evs = append([]schema.Envelope{*created}, evs...)
	}
	return evs, nil
}

// first reads the session's first event, judged.
func (l *Live) first(ctx context.Context, id string) (*schema.Envelope, error) {
	var ev schema.Envelope
	_, err := l.cfg.Store.ReadJudged(ctx, &logstore.Judge{SessionID: id}, func(_ *logstore.Msg, e *schema.Envelope) error {
		ev = *e
		return logstore.ErrStop
	})
	return &ev, err
}
