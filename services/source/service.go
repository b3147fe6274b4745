package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Names.
const (
	ServiceName    = "sessionlog-source"
	ServiceVersion = "1.0.0"
	// QueueGroup is shared by every replica: each request goes to one.
	QueueGroup = "sessionlog-source"
)

// Config configures the source service.
type Config struct {
	// Store holds the source index (SESSION_SOURCES) and the erasure
	// records; the session's tail is read from it too.
	Store *logstore.Store
	// Conn serves the endpoints (required); the service reads and appends
	// sessions through the writer on it (pkg/client).
	Conn       *nats.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
	// MaxConcurrent bounds requests handled at once (<= 0: the default).
	MaxConcurrent int
	// SourceStates bounds the transcripts whose mapping state source
	// appends keep, each holding the session's fold and its entries' keys
	// (at most maxStateEntries of them: a longer transcript is mapped
	// again on each append rather than held); negative: none, every
	// source append reads and maps its transcript again.
	SourceStates int
	// MaxSourceBytes bounds the stored bytes of a transcript's session a
	// source append reads to map it again (<= 0: the default); over it
	// the append is refused with too_large. At most
	// sourceRemaps such reads run at once.
	MaxSourceBytes int
}

// DefaultConfig holds the source service's defaults, the one place they
// are stated: New gives each field left zero its value here (its comment
// says what else it replaces), and the commands' flags default to it.
// The dependencies (Store, Conn) have none.
func DefaultConfig() Config {
	return Config{MaxConcurrent: 256, SourceStates: 128, MaxSourceBytes: 64 << 20}
}

// withDefaults is c with DefaultConfig's value in each field left zero.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = d.MaxConcurrent
	}
	if c.SourceStates == 0 {
		c.SourceStates = d.SourceStates
	}
	if c.MaxSourceBytes <= 0 {
		c.MaxSourceBytes = d.MaxSourceBytes
	}
	return c
}

// Service is the source service.
type Service struct {
	cfg Config
	st  *logstore.Store
	nc  *nats.Conn
	// c reads and appends sessions through the writer for operators, and
	// clients (by tenant, clientsMu) for agents (clientOf).
	c         *client.Client
	clientsMu sync.Mutex
	clients   map[string]*client.Client
	log       *slog.Logger
	m         *metrics
	// conts are the mapping states of transcripts appended through
	// sessions.api.source.append (source.go).
	conts *lru.Cache[string, *sourceCont]
	// remaps holds a slot per source append reading a whole transcript.
	remaps chan struct{}
	reqs   *wire.Requests
	// afterCheck, when set (tests), runs after a source append's check
	// that the caller may use the session and before its key is recorded.
	afterCheck atomic.Pointer[func()]
	ready      atomic.Bool
	running    atomic.Bool
}

// New checks cfg and builds the service; Run starts it.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("source: Config.Store is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("source: Config.Conn is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg = cfg.withDefaults()
	conts, err := lru.New[string, *sourceCont](max(cfg.SourceStates, 1))
	if err != nil {
		return nil, fmt.Errorf("source: continuations: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("source: metrics: %w", err)
	}
	return &Service{
		cfg:     cfg,
		st:      cfg.Store,
		nc:      cfg.Conn,
		c:       client.New(cfg.Conn),
		clients: map[string]*client.Client{},
		log:     cfg.Logger,
		m:       m,
		conts:   conts,
		remaps:  make(chan struct{}, sourceRemaps),
		reqs:    wire.NewRequests(cfg.MaxConcurrent),
	}, nil
}

// Ready returns nil once the endpoints are subscribed and NATS is connected.
func (s *Service) Ready() error { return wire.Ready("source", s.ready.Load(), s.nc) }

// Run serves until ctx is cancelled, then stops taking requests, waits for
// the ones in flight and returns nil.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("source: already running")
	}
	// Requests in flight finish with their own context: cancelling Run
	// must not cut an append that is being stored.
	svc, err := wire.Serve(context.WithoutCancel(ctx), s.nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "sessionlog source endpoints: an agent's own transcript, mapped as import maps its file",
		QueueGroup:  QueueGroup,
	}, s.reqs,
		wire.Endpoint{Name: "source-load", Subject: api.SubjectSourceLoad, Handle: s.handleSourceLoad},
		wire.Endpoint{Name: "source-append", Subject: api.SubjectSourceAppend, Handle: s.handleSourceAppend},
		wire.Endpoint{Name: "source-list", Subject: api.SubjectSourceList, Handle: s.handleSourceList},
		wire.Endpoint{Name: "source-subkeys", Subject: api.SubjectSourceSubkeys, Handle: s.handleSourceSubkeys})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	wire.Subscribed(s.nc, s.log)
	s.ready.Store(true)
	s.log.Info("source serving", "subjects", "sessions.api.source.*")
	<-ctx.Done()
	s.ready.Store(false)
	err = svc.Stop()
	s.reqs.Wait()
	if err != nil {
		s.log.Warn("source: stop", "err", err)
	}
	return nil
}

// respondJSON answers v, or err.
func (s *Service) respondJSON(reply string, v any, err error) {
	wire.Reply(s.nc, s.log, reply, v, err)
}

// fromClient is err as the writer answered it: a contract error keeps its
// code (and conflict its current seq), so the agent gets the writer's
// refusal, not an internal error.
func fromClient(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err
	}
	se := &schema.Error{Code: ce.Code, Message: ce.Message, Index: ce.Index}
	if ce.Code == schema.CodeConflict {
		cur := ce.CurrentSeq
		se.CurrentSeq = &cur
	}
	return se
}

type metrics struct {
	sources *prometheus.CounterVec // mapping
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		// The name is the writer's, where the endpoints were served
		// before: dashboards keep it.
		sources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionlog_writer_source_appends_total",
			Help: "Source appends that mapped new entries, by mapping (continued: only the new entries; remapped: the stored transcript read and mapped again).",
		}, []string{"mapping"}),
	}
	if err := reg.Register(m.sources); err != nil {
		return nil, err
	}
	return m, nil
}
