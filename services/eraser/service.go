package eraser

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// Names.
const (
	ServiceName    = "sessionlog-eraser"
	ServiceVersion = "1.0.0"
	// QueueGroup is shared by every replica: each request goes to one.
	QueueGroup = "sessionlog-eraser"

	// eraseTimeout bounds one erase request: writing the records (and,
	// for a cascade, finding the descendants). The jobs run apart from
	// the request, with no timeout (jobs.go).
	eraseTimeout = 5 * time.Minute
	lockStripes  = 256
	// forkStale: a fork record not renewed for this long was left by a
	// forker that stopped, and an erase job does not wait for it (a
	// forker renews its record every StaleAfter/3, 10 s by default).
	forkStale = time.Minute
)

// The wire types of the errors (defined in pkg/api).
type (
	ErrorBody   = wire.ErrorBody
	ErrorDetail = wire.ErrorDetail
)

// Config configures a Service.
type Config struct {
	Store Log
	// Conn serves sessions.api.erase (required), as a user that may
	// delete (deploy/nats, "eraser").
	Conn   *nats.Conn
	Logger *slog.Logger
	// Registerer takes the eraser's metrics (metrics.go; default: a
	// registry of its own).
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now); timers always use real time.
	Now func() time.Time
	// SweepInterval is how often unfinished erase jobs are started again
	// (negative: every eraseResumeEvery) and, when shorter than
	// RetainClosed, how often retention runs.
	SweepInterval time.Duration
	// MaxDemand bounds erase requests served at once.
	MaxDemand int
	// RetainClosed, when > 0, erases sessions closed for longer than
	// this (retention.go), after writing them to ArchiveDir if set.
	RetainClosed time.Duration
	ArchiveDir   string
}

// DefaultConfig holds the eraser's defaults, the one place they are
// stated: New gives each field left zero its value here (its comment says
// what else it replaces), and the commands' flags default to it.
// RetainClosed and ArchiveDir have none (no retention), nor have the
// dependencies (Store, Conn).
func DefaultConfig() Config {
	return Config{SweepInterval: time.Minute, MaxDemand: 64}
}

// withDefaults is c with DefaultConfig's value in each field left zero.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.SweepInterval == 0 {
		c.SweepInterval = d.SweepInterval
	}
	if c.MaxDemand <= 0 {
		c.MaxDemand = d.MaxDemand
	}
	return c
}

// Service is the eraser: sessions.api.erase, the erase jobs and retention.
type Service struct {
	cfg  Config
	st   Log
	nc   *nats.Conn
	log  *slog.Logger
	now  func() time.Time
	reqs *wire.Requests
	// locks serializes the erase of one session in this process.
	locks [lockStripes]sync.Mutex
	seed  maphash.Seed

	// eraseStep, if set (tests only), runs after each step of an erase
	// (erase.go): an error stops the erase there, as a kill would.
	eraseStep atomic.Pointer[func(step string) error]

	// jobs: the erase jobs (jobs.go).
	jobs eraseJobs

	running atomic.Bool
	ready   atomic.Bool
	wg      sync.WaitGroup
}

// New checks cfg and builds a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("eraser: Config.Store is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("eraser: Config.Conn is required")
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
	if _, err := newMetrics(cfg.Registerer, cfg.Store); err != nil {
		return nil, fmt.Errorf("eraser: metrics: %w", err)
	}
	return &Service{cfg: cfg, st: cfg.Store, nc: cfg.Conn, log: cfg.Logger, now: cfg.Now,
		reqs: wire.NewRequests(cfg.MaxDemand), seed: maphash.MakeSeed()}, nil
}

// Ready returns nil once the endpoint is served.
func (s *Service) Ready() error { return wire.Ready("eraser", s.ready.Load(), s.nc) }

// Run serves until ctx is cancelled, then stops and returns nil. An erase
// cut short by the stop is resumed from its record by the next eraser
// that runs (jobs.go).
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("eraser: already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svc, err := wire.Serve(context.WithoutCancel(ctx), s.nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "sessionlog eraser: erases sessions on request and by retention",
		QueueGroup:  QueueGroup,
	}, s.reqs, wire.Endpoint{Name: "erase", Subject: api.SubjectErase, Timeout: eraseTimeout, Handle: s.handleErase})
	if err != nil {
		return fmt.Errorf("eraser: %w", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.eraseLoop(ctx)
	}()
	if s.cfg.RetainClosed > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.retentionLoop(ctx)
		}()
	}
	s.log.Info("eraser running", "sweep", s.cfg.SweepInterval, "retain_closed", s.cfg.RetainClosed)
	wire.Subscribed(s.nc, s.log)
	s.ready.Store(true)

	<-ctx.Done()
	s.ready.Store(false)
	err = svc.Stop()
	cancel()
	s.reqs.Wait()
	s.wg.Wait()
	if err != nil {
		s.log.Warn("eraser: stop", "err", err)
	}
	return nil
}

// lock serializes the erase of one session in this process; call the
// result to unlock.
func (s *Service) lock(id string) (unlock func()) {
	m := &s.locks[maphash.String(s.seed, id)%lockStripes]
	m.Lock()
	return m.Unlock
}

// errorDetail maps an error to the wire.
func errorDetail(err error) ErrorDetail { return wire.Detail(err) }

func (s *Service) respondErr(reply string, d ErrorDetail) {
	if !wire.Answerable(reply) {
		return
	}
	if err := s.nc.PublishMsg(wire.ErrorMsg(reply, d)); err != nil {
		s.log.Warn("eraser: reply", "err", err)
	}
}
