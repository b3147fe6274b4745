package forker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Names.
const (
	ServiceName    = "sessionlog-forker"
	ServiceVersion = "1.0.0"
	// QueueGroup is shared by every replica: each request goes to one.
	QueueGroup = "sessionlog-forker"
	// ForkBucket holds one record per copy in flight (key = child id).
	ForkBucket = logstore.ForkBucket

	// AbandonReason is the session/closed reason of an abandoned copy.
	AbandonReason = "fork abandoned"
)

// Config configures the forker.
type Config struct {
	Store Log
	// Conn is the connection sessions.api.fork is served on.
	Conn       *nats.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
	// NewID makes default child ids (default: a ULID).
	NewID func() string
	// BatchSize is the number of events per atomic batch (at most 1000).
	BatchSize int
	// MaxConcurrent bounds forks copied at once; more requests wait.
	MaxConcurrent int
	// SweepEvery is how often the forker looks for copies a crashed
	// forker left behind (it also looks once at start).
	SweepEvery time.Duration
	// StaleAfter: a copy whose record has not been renewed for this long
	// belongs to a forker that is gone, and is taken over. The copying
	// forker renews the record every StaleAfter/3.
	StaleAfter time.Duration
	// ForkTimeout bounds one fork request's copy.
	ForkTimeout time.Duration
	// ScanBodyBudget bounds the bytes of parent bodies one fork keeps
	// from its scan, so that the copy need not read the parent again
	// (0: the default; negative: keep none, always read again).
	ScanBodyBudget int
	// NoSnapshots scans a parent from its start, never from its snapshot
	// in SESSION_SNAPSHOTS (benchmarks compare the two).
	NoSnapshots bool
	// Step, if set (tests only), runs at each step of a fork request
	// named below, in the request's goroutine.
	Step func(step string)
}

// DefaultConfig holds the forker's defaults, the one place they are
// stated: New gives each field left zero its value here (its comment
// says what else it replaces), and the commands' flags default to it. The dependencies
// (Store, Conn) have none.
func DefaultConfig() Config {
	return Config{
		BatchSize:     schema.MaxBatchEvents,
		MaxConcurrent: 8,
		SweepEvery:    30 * time.Second,
		StaleAfter:    30 * time.Second,
		ForkTimeout:   30 * time.Minute,
		// About 100,000 events of ordinary size.
		ScanBodyBudget: 48 << 20,
	}
}

// withDefaults is c with DefaultConfig's value in each field left zero
// (and in a BatchSize over the server's limit).
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BatchSize <= 0 || c.BatchSize > schema.MaxBatchEvents {
		c.BatchSize = d.BatchSize
	}
	if c.BatchSize < 2 {
		// The last batch holds at least the last copy and fork/committed.
		c.BatchSize = 2
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = d.MaxConcurrent
	}
	if c.ScanBodyBudget == 0 {
		c.ScanBodyBudget = d.ScanBodyBudget
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = d.SweepEvery
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = d.StaleAfter
	}
	if c.ForkTimeout <= 0 {
		c.ForkTimeout = d.ForkTimeout
	}
	return c
}

// The steps of a fork request Config.Step is called at.
const (
	StepScanned = "scanned" // the parent is read up to the cut; nothing is written yet
	StepClaimed = "claimed" // the child's fork record is written; the erasure records are not read yet
	StepChecked = "checked" // neither the parent nor the child has an erasure record; the copy starts
	StepCopied  = "copied"  // the copy ended (whichever way); the child's erasure record is not read yet
)

// Service is the forker.
type Service struct {
	cfg      Config
	st       Log
	log      *slog.Logger
	m        *metrics
	owner    string
	records  atomic.Pointer[Records]
	sem      chan struct{}
	wg       sync.WaitGroup
	ready    atomic.Bool
	mu       sync.Mutex
	inflight map[string]struct{}
}

// New checks cfg and builds the service; Run starts it.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("forker: Config.Store is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("forker: Config.Conn is required")
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
	if cfg.NewID == nil {
		cfg.NewID = func() string { return ulid.Make().String() }
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Service{
		cfg: cfg, st: cfg.Store, log: cfg.Logger, m: m, // its runner names the service
		owner:    ulid.Make().String(),
		sem:      make(chan struct{}, cfg.MaxConcurrent),
		inflight: map[string]struct{}{},
	}, nil
}

// Ready is nil once the endpoint is serving.
func (s *Service) Ready() error {
	if !s.ready.Load() {
		return errors.New("forker: not serving yet")
	}
	return nil
}

// Run provisions the fork bucket, serves sessions.api.fork, finishes
// copies left behind and keeps sweeping until ctx is cancelled; then it
// stops taking requests, waits for the copies it runs and returns nil.
func (s *Service) Run(ctx context.Context) error {
	if err := s.openBucket(ctx); err != nil {
		return err
	}
	svc, err := micro.AddService(s.cfg.Conn, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "copies a safe prefix of a session into a new session",
		QueueGroup:  QueueGroup,
	})
	if err != nil {
		return fmt.Errorf("forker: add service: %w", err)
	}
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	err = svc.AddEndpoint("fork", micro.HandlerFunc(func(req micro.Request) { s.handle(work, req) }),
		micro.WithEndpointSubject(logstore.SubjectFork))
	if err != nil {
		_ = svc.Stop()
		return fmt.Errorf("forker: add endpoint: %w", err)
	}
	wire.Subscribed(s.cfg.Conn, s.log)
	s.ready.Store(true)
	s.log.Info("serving", "subject", logstore.SubjectFork)

	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		t := time.NewTicker(s.cfg.SweepEvery)
		defer t.Stop()
		for {
			if err := s.Sweep(work); err != nil && work.Err() == nil {
				s.log.Warn("sweep", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	<-ctx.Done()
	s.ready.Store(false)
	_ = svc.Stop()
	// Copies in flight stop at their next batch; their records stay, and
	// the next forker to sweep finishes them.
	cancel()
	<-sweepDone
	s.wg.Wait()
	return nil
}

func (s *Service) openBucket(ctx context.Context) error {
	o, ok := s.st.(recordsOpener)
	if !ok {
		return errors.New("forker: the log keeps no fork records")
	}
	recs, err := o.OpenForkRecords(ctx)
	if err != nil {
		return fmt.Errorf("forker: %w", err)
	}
	s.useRecords(recs)
	return nil
}

// useRecords makes recs the fork bucket.
func (s *Service) useRecords(recs Records) { s.records.Store(&recs) }

// bucket is the fork bucket, nil until Run opened it.
func (s *Service) bucket() Records {
	if p := s.records.Load(); p != nil {
		return *p
	}
	return nil
}

// handle answers one request. The copy runs on its own goroutine so one
// long fork does not hold up the endpoint's subscription; the reply is
// published directly, since micro.Request's bookkeeping is not safe from
// another goroutine.
func (s *Service) handle(ctx context.Context, req micro.Request) {
	nc := s.cfg.Conn
	reply, data := req.Reply(), req.Data()
	respond := func(m *nats.Msg) {
		if !wire.Answerable(reply) {
			return
		}
		if err := nc.PublishMsg(m); err != nil {
			s.log.Warn("reply", "err", err)
		}
	}
	var r Request
	if err := schema.Unmarshal(data, &r); err != nil {
		s.m.forks.WithLabelValues(string(schema.CodeBadRequest)).Inc()
		respond(errorMsg(reply, schema.Errorf(schema.CodeBadRequest, "fork request: %v", err)))
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			respond(errorMsg(reply, schema.Errorf(schema.CodeNotCommitted, "forker is stopping")))
			return
		}
		defer func() { <-s.sem }()
		ctx, cancel := context.WithTimeout(ctx, s.cfg.ForkTimeout)
		defer cancel()
		caller, err := api.CallerOf(req.Headers().Values(api.RequestInfoHeader))
		var rep Reply
		if err == nil {
			rep, err = s.ForkAs(ctx, caller, r)
		}
		if err != nil {
			respond(errorMsg(reply, err))
			return
		}
		body, _ := json.Marshal(rep)
		respond(&nats.Msg{Subject: reply, Data: body})
	}()
}

func (s *Service) markInflight(child string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.inflight[child]; ok {
		return false
	}
	s.inflight[child] = struct{}{}
	return true
}

func (s *Service) doneInflight(child string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, child)
}
