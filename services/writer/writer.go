package writer

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
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
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Names.
const (
	ServiceName    = "sessionlog-writer"
	ServiceVersion = "1.0.0"
	// QueueGroup is shared by every replica: each request goes to one.
	QueueGroup = "sessionlog-writer"

	stripes = 4096
)

// Config configures the writer.
type Config struct {
	Store *logstore.Store
	// Conn serves the endpoints (required): the store's own connection
	// or one of its own, which lets the server read requests and JetStream
	// publishes of the writer on separate connections.
	Conn       *nats.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
	// StateCacheSize bounds the sessions whose folded state is cached.
	StateCacheSize int
	// MaxEventBytes bounds one encoded event (default: the store's limit;
	// never above it).
	MaxEventBytes int
	// LeaseTTL is the lease TTL used for throttling renewals (default: the
	// store's LeaseTTL, which is what the KV entries get).
	LeaseTTL time.Duration
	// MaxConcurrent bounds requests handled at once.
	MaxConcurrent int
	// ConflictRetries bounds retries of appends without expectedSeq.
	ConflictRetries int
	// TenantEventsPerSecond bounds the events the agents of one tenant
	// (other than the operators) append per second, with a burst of as
	// many (0: no bound); over it an append is refused quota_exceeded.
	TenantEventsPerSecond float64
	// TenantMaxSessions and TenantMaxBytes bound the sessions of one
	// tenant and the bytes their events store (0: no bound), for its
	// agents' appends (an operator's are counted, never refused); over a
	// bound an append is refused quota_exceeded. The usage is kept in
	// TENANT_USAGE, shared by every writer (usage.go).
	TenantMaxSessions int64
	TenantMaxBytes    int64
	// TenantBounds replaces both for the tenants it names, and the
	// events per second for those whose bound sets them.
	TenantBounds map[string]logstore.TenantBound
	// UsageFlush is how often the bytes and sessions stored are added to
	// TENANT_USAGE.
	UsageFlush time.Duration
	// SnapshotEvery is how many events a session gains between two
	// snapshots of its state in SESSION_SNAPSHOTS, written in the
	// background after an append (0: the default; negative: none written
	// or read).
	SnapshotEvery int
}

// DefaultConfig holds the writer's defaults, the one place they are
// stated: New gives each field left zero its value here (its comment
// says what else it replaces), and the commands' flags default to it. LeaseTTL and
// MaxEventBytes default to the store's; the dependencies (Store, Conn)
// have none.
func DefaultConfig() Config {
	return Config{
		StateCacheSize: 10_000,
		MaxConcurrent:  1024,
		// ConflictRetries bounds how often an append without expectedSeq
		// is retried after another writer moved the tail.
		ConflictRetries: 10,
		UsageFlush:      time.Second,
		SnapshotEvery:   10_000,
	}
}

// withDefaults is c with DefaultConfig's value in each field left zero.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.StateCacheSize <= 0 {
		c.StateCacheSize = d.StateCacheSize
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = d.MaxConcurrent
	}
	if c.ConflictRetries <= 0 {
		c.ConflictRetries = d.ConflictRetries
	}
	if c.UsageFlush <= 0 {
		c.UsageFlush = d.UsageFlush
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = d.SnapshotEvery
	}
	return c
}

// limits are the bounds per tenant cfg sets, as the writer's quotas and
// usage judge them and TENANT_USAGE records them.
func (c Config) limits() logstore.TenantLimits {
	return logstore.TenantLimits{Sessions: c.TenantMaxSessions, Bytes: c.TenantMaxBytes, EventsPerSecond: c.TenantEventsPerSecond, Tenants: c.TenantBounds}
}

// Service is the writer.
type Service struct {
	cfg    Config
	st     *logstore.Store
	nc     *nats.Conn
	log    *slog.Logger
	m      *metrics
	cache  *lru.Cache[string, *entry]
	leases *lru.Cache[string, leaseMark]
	// owed are the claims this writer could not record after committed
	// appends (session id -> holder); owedLoop writes them (lease.go).
	owed    *lru.Cache[string, string]
	locks   [stripes]sync.Mutex
	seed    maphash.Seed
	sem     chan struct{} // one per worker
	jobs    chan job      // requests for idle workers
	stop    chan struct{} // closed when Run returns: idle workers exit
	wg      sync.WaitGroup
	snaps   sync.WaitGroup // snapshots being written
	ready   atomic.Bool
	running atomic.Bool
	// validateLimit is the MaxEventBytes passed to schema.Validate: -1
	// (the store checks the encoded size) unless this writer's limit is
	// lower than the store's.
	validateLimit int
	hits, misses  prometheus.Counter
	quotas        *tenantQuotas
	usage         *tenantUsage
	// erasing: the ids whose erase is under way (erased.go).
	erasing sync.Map
}

// New checks cfg and builds the service; Run starts it.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("writer: Config.Store is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("writer: Config.Conn is required")
	}
	sc := cfg.Store.Config()
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
	if cfg.MaxEventBytes <= 0 || cfg.MaxEventBytes > sc.MaxEventBytes {
		cfg.MaxEventBytes = sc.MaxEventBytes
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = sc.LeaseTTL
	}
	cache, err := lru.New[string, *entry](cfg.StateCacheSize)
	if err != nil {
		return nil, fmt.Errorf("writer: state cache: %w", err)
	}
	leases, err := lru.New[string, leaseMark](cfg.StateCacheSize)
	if err != nil {
		return nil, fmt.Errorf("writer: lease cache: %w", err)
	}
	owed, err := lru.New[string, string](cfg.StateCacheSize)
	if err != nil {
		return nil, fmt.Errorf("writer: owed claims: %w", err)
	}
	s := &Service{
		owed:   owed,
		cfg:    cfg,
		st:     cfg.Store,
		nc:     cfg.Conn,
		log:    cfg.Logger,
		cache:  cache,
		leases: leases,
		seed:   maphash.MakeSeed(),
		sem:    make(chan struct{}, cfg.MaxConcurrent),
		jobs:   make(chan job),
		stop:   make(chan struct{}),
	}
	m, err := newMetrics(cfg.Registerer, func() float64 { return float64(s.cache.Len()) })
	if err != nil {
		return nil, fmt.Errorf("writer: metrics: %w", err)
	}
	s.m = m
	if s.quotas, err = newTenantQuotas(cfg.limits(), cfg.Now, cfg.Registerer); err != nil {
		return nil, fmt.Errorf("writer: metrics: %w", err)
	}
	if s.usage, err = newTenantUsage(cfg, cfg.Registerer); err != nil {
		return nil, fmt.Errorf("writer: metrics: %w", err)
	}
	s.hits, s.misses = m.cache.WithLabelValues("hit"), m.cache.WithLabelValues("miss")
	s.validateLimit = -1
	if cfg.MaxEventBytes < sc.MaxEventBytes {
		s.validateLimit = cfg.MaxEventBytes
	}
	return s, nil
}

// Ready returns nil once the endpoints are subscribed and NATS is connected.
func (s *Service) Ready() error {
	if !s.ready.Load() {
		return errors.New("writer: not started")
	}
	if !s.nc.IsConnected() {
		return fmt.Errorf("writer: nats %s", s.nc.Status())
	}
	return nil
}

// Run serves until ctx is cancelled, then stops taking requests, waits for
// the ones in flight and returns nil.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("writer: already running")
	}
	// Requests in flight finish with their own context: cancelling Run
	// must not turn an append that is being stored into an unknown one.
	reqCtx := context.WithoutCancel(ctx)
	// The tenants' usage is known before the first request is judged; its
	// last flush runs once the requests in flight are answered.
	if err := s.usage.start(ctx); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "sessionlog append path: validates, checks structure, appends to the session log",
		QueueGroup:  QueueGroup,
	})
	if err != nil {
		return fmt.Errorf("writer: add service: %w", err)
	}
	for _, ep := range []struct {
		name, subject string
		h             func(context.Context, *nats.Msg)
	}{
		{"append", logstore.SubjectAppend, s.handleAppend},
		{"heartbeat", logstore.SubjectHeartbeat, s.handleHeartbeat},
		{"read", api.SubjectRead, s.handleRead},
	} {
		h := ep.h
		if err := svc.AddEndpoint(ep.name, micro.HandlerFunc(func(r micro.Request) { s.dispatch(reqCtx, r, h) }),
			micro.WithEndpointSubject(ep.subject)); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("writer: endpoint %s: %w", ep.name, err)
		}
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.owedLoop(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.followErasing(ctx)
	}()
	usageCtx, stopUsage := context.WithCancel(reqCtx)
	usageDone := make(chan struct{})
	go func() {
		defer close(usageDone)
		s.usage.run(usageCtx)
	}()
	wire.Subscribed(s.nc, s.log)
	s.ready.Store(true)
	s.log.Info("writer serving", "append", logstore.SubjectAppend, "heartbeat", logstore.SubjectHeartbeat)
	<-ctx.Done()
	s.ready.Store(false)
	err = svc.Stop()
	close(s.stop) // busy workers finish their request, idle ones exit
	s.wg.Wait()
	stopUsage()
	<-usageDone
	s.snaps.Wait()
	if err != nil {
		s.log.Warn("writer: stop", "err", err)
	}
	return nil
}

// job is one request for a worker.
type job struct {
	ctx context.Context
	m   *nats.Msg
	h   func(context.Context, *nats.Msg)
}

// workerIdle is how long a worker waits for the next request before it
// exits.
const workerIdle = 10 * time.Second

// dispatch hands a request to a worker: micro calls handlers one at a
// time per endpoint, and an append waits for JetStream. Workers are kept
// (up to MaxConcurrent) while requests keep coming, so a request costs no
// goroutine start and no stack growth. The reply is published directly
// (with the micro error headers) rather than through micro.Request, whose
// bookkeeping is not safe from another goroutine.
func (s *Service) dispatch(ctx context.Context, r micro.Request, h func(context.Context, *nats.Msg)) {
	// The headers carry who asked (api.RequestInfoHeader, set by the
	// server on requests from a tenant's account).
	j := job{ctx: ctx, m: &nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Data: r.Data(), Header: nats.Header(r.Headers())}, h: h}
	select {
	case s.jobs <- j: // an idle worker took it
		return
	default:
	}
	select {
	case s.jobs <- j:
	case s.sem <- struct{}{}:
		s.wg.Add(1)
		go s.worker(j)
	}
}

// worker runs j, then the requests handed to it, until it has been idle
// for workerIdle or the service stops. Its idle timer is not reset per
// request (a Reset was a visible share of a one-event append): it fires
// workerIdle after it was armed, and a worker that was busy since waits
// out the rest of its idle time.
func (s *Service) worker(j job) {
	defer func() {
		<-s.sem
		s.wg.Done()
	}()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	start := time.Now()
	for {
		s.m.inflight.Inc()
		// No deadline here: the store bounds each JetStream call with its
		// own request timeout only when the context has none, and a single
		// deadline for the whole request would leave a lost acknowledgement
		// no time to be resolved.
		j.h(j.ctx, j.m)
		s.m.inflight.Dec()
		done := time.Since(start)
	wait:
		select {
		case j = <-s.jobs:
		case <-idle.C:
			if rest := workerIdle - (time.Since(start) - done); rest > 0 {
				idle.Reset(rest)
				goto wait
			}
			return
		case <-s.stop:
			return
		}
	}
}

func (s *Service) respond(reply string, body []byte) {
	if !wire.Answerable(reply) {
		return
	}
	if err := s.nc.Publish(reply, body); err != nil {
		s.log.Warn("writer: reply", "err", err)
	}
}

func (s *Service) respondErr(reply string, d ErrorDetail) {
	if !wire.Answerable(reply) {
		return
	}
	if err := s.nc.PublishMsg(errorMsg(reply, d)); err != nil {
		s.log.Warn("writer: reply", "err", err)
	}
}

// lock serializes the appends of one session inside this process.
func (s *Service) lock(sessionID string) *sync.Mutex {
	return &s.locks[maphash.String(s.seed, sessionID)%stripes]
}

func asSchemaError(err error, target **schema.Error) bool { return errors.As(err, target) }
