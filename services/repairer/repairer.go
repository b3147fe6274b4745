package repairer

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
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Names.
const (
	ServiceName    = "sessionlog-repairer"
	ServiceVersion = "1.0.0"
	// QueueGroup is shared by every replica: each on-demand request goes to one.
	QueueGroup = "sessionlog-repairer"

	// dropQueue bounds the claims of repaired sessions waiting to be
	// dropped (dropLoop); past it an evaluation drops its own.
	dropQueue = 4096

	// maxConflicts bounds re-evaluations after lost sequence checks; a
	// session that keeps changing has a live writer and waits for the
	// next trigger.
	maxConflicts = 3
	retryBackoff = time.Second
	// warmLead: how long before a lease's expiry + grace the repairer
	// first reads the session's state, at most (onRenewed).
	warmLead = 2 * time.Second
)

// Config configures a Service.
type Config struct {
	Store Log
	// Conn serves sessions.api.repair (required).
	Conn       *nats.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now); timers always use real time.
	Now func() time.Time
	// LeaseTTL is the TTL holders' leases are written with (default the
	// store's); it dates an expiry when only the last renewal is known.
	LeaseTTL time.Duration
	// Grace is how long a lease must have been gone before the session is
	// repaired. Zero repairs as soon as the lease is gone.
	Grace time.Duration
	// SweepInterval between sweeps of every claimed session (negative:
	// sweep only on start).
	SweepInterval time.Duration
	// Concurrency is how many sessions are evaluated at once. An evaluation whose repair waits for its
	// grouped batch gives its place to the next one (pipeline.go); up to
	// waitingPerWorker times as many may wait so.
	Concurrency int
	// KeepApprovalsPending leaves pending approvals open (DESIGN.md 6).
	KeepApprovalsPending bool
	// StateCacheSize bounds the folded session states kept between checks.
	StateCacheSize int
	// NoSnapshots folds a session not cached from its start, never from
	// its snapshot in SESSION_SNAPSHOTS (benchmarks compare the two).
	NoSnapshots bool
	// SweepQueue bounds the sessions a sweep has queued and not yet
	// evaluated.
	SweepQueue int
	// MaxDemand bounds on-demand requests served at once.
	MaxDemand int
	// GroupEvents is the most events in one grouped batch: repairs ready
	// at once are committed together (negative: every repair is its own
	// batch; at most the server's limit on an atomic batch).
	GroupEvents int
	// GroupInflight bounds grouped batches in flight (0: the default, 1
	// on a store of one replica).
	GroupInflight int
}

// DefaultConfig holds the repairer's defaults, the one place they are
// stated: New gives each field left zero its value here (its comment says
// what else it replaces), and the commands' flags default to it. Grace is
// never filled in (zero repairs as soon as a lease is gone), LeaseTTL
// defaults to the store's, and the dependencies (Store, Conn) have none.
func DefaultConfig() Config {
	return Config{
		Grace:          5 * time.Second,
		SweepInterval:  time.Minute,
		Concurrency:    256,
		StateCacheSize: 10_000,
		// The sweep pulls the next claimed sessions only as workers take
		// the queued ones, so a log of 100,000 claimed sessions is never
		// in memory at once.
		SweepQueue: 2048,
		MaxDemand:  64,
		// The server's limit on an atomic batch.
		GroupEvents: schema.MaxBatchEvents,
		// On a replicated stream (the server takes at most 50 open atomic
		// batches per stream; the store keeps its own below 40) each batch
		// is staged in memory and replicated, and a second batch in
		// flight overlaps the first one's replication while the next
		// group fills.
		//
		// An R1 file stream stages each atomic batch in its own file
		// store and fsyncs it before it commits, one batch at a time, and
		// that fsync (5 to 50 ms here, more under disk load) costs about
		// the same for one session as for 250. A second batch in flight
		// only waits behind the first at the server, and splits what is
		// pending into more fsyncs; so on R1 one committer takes
		// everything pending whenever it is free (a burst is a few full
		// batches): withDefaults gives a store of one replica 1.
		GroupInflight: 2,
	}
}

// withDefaults is c with DefaultConfig's value in each field left zero
// (GroupInflight 1 when the store has one replica).
func (c Config) withDefaults(replicas int) Config {
	d := DefaultConfig()
	if c.SweepInterval == 0 {
		c.SweepInterval = d.SweepInterval
	}
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	if c.StateCacheSize <= 0 {
		c.StateCacheSize = d.StateCacheSize
	}
	if c.SweepQueue <= 0 {
		c.SweepQueue = d.SweepQueue
	}
	if c.MaxDemand <= 0 {
		c.MaxDemand = d.MaxDemand
	}
	if c.GroupEvents == 0 {
		c.GroupEvents = d.GroupEvents
	}
	c.GroupEvents = min(c.GroupEvents, schema.MaxBatchEvents)
	if c.GroupInflight <= 0 {
		c.GroupInflight = d.GroupInflight
		if replicas <= 1 {
			c.GroupInflight = 1 // one fsync at a time
		}
	}
	return c
}

// Service is the repairer.
type Service struct {
	cfg    Config
	st     Log
	nc     *nats.Conn
	log    *slog.Logger
	m      *metrics
	now    func() time.Time
	states *lru.Cache[string, folded]
	// locks serializes the evaluations of one session in this process
	// (one lock a session being evaluated: two sessions never wait for
	// each other, even while a grouped batch holds both).
	lmu    sync.Mutex
	locks  map[string]*sessionLock
	demand chan struct{}
	drops  chan claimDrop

	mu       sync.Mutex
	cond     *sync.Cond
	room     *sync.Cond // signalled when the sweep's queue has room
	urgent   []item     // lease expiries and their grace timers
	sweepQ   []item     // sweeps: behind every urgent item
	queued   map[string]struct{}
	timers   map[string]*wake
	lastPut  map[string]time.Time // last renewal seen per lease key
	expiries map[string]time.Time // best known expiry of a gone lease
	warm     map[string]warmLook  // first looks of sessions due soon
	epoch    int                  // lease watches started
	stopping bool

	// out: the periods the log could not take writes (outage.go).
	out *outages

	// grouper commits repairs in grouped batches while Run runs.
	grouper atomic.Pointer[grouper]

	// groupFault, if set (tests only), runs after a grouped batch was
	// answered: an error replaces the answer, as if it was lost.
	groupFault atomic.Pointer[func() error]

	// slots: evaluations running (Config.Concurrency); waiters:
	// evaluations that gave their slot up to wait for a grouped batch
	// (pipeline.go).
	slots   chan struct{}
	waiters chan struct{}

	// probeHook, if set (tests only), stands in for the writability
	// probe (logstore.Writable).
	probeHook atomic.Pointer[func(ctx context.Context) ([]string, error)]

	// born and lastHeard: when each of the streams a probe asks about
	// last answered a read or write of this process's own (heard), as
	// time since born.
	born      time.Time
	lastHeard [heardFrom]atomic.Int64

	// beforeAppend, if set (tests only), runs between planning a repair
	// and appending it.
	beforeAppend atomic.Pointer[func(id string)]

	// repairing counts repairs between their decision and their commit.
	repairing atomic.Int64

	// usage counts the bytes of the repair events in their tenants'
	// usage (TENANT_USAGE), flushed while Run runs. A repair is never
	// refused over a tenant's bounds: it closes what is open.
	usage *logstore.UsageCounter

	// stages, if set, observes the stages of repairs (ObserveStages).
	stages atomic.Pointer[func(id string, st Stage, at time.Time)]

	running  atomic.Bool
	ready    atomic.Bool
	watching atomic.Bool
	wg       sync.WaitGroup
}

// folded is a session state as of a stream position; never mutated after
// it is cached.
type folded struct {
	st        *session.State
	streamSeq uint64
	hash      string // ChainHash of the body at streamSeq ("": not known)
}

type trigger string

const (
	triggerExpiry trigger = "lease_expiry"
	triggerSweep  trigger = "sweep"
	triggerDemand trigger = "demand"
)

type item struct {
	id  string
	why trigger
}

type wake struct {
	at time.Time
	t  *time.Timer
}

// New checks cfg and builds a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("repairer: Config.Store is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("repairer: Config.Conn is required")
	}
	if cfg.Grace < 0 {
		return nil, errors.New("repairer: Grace must be >= 0")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg = cfg.withDefaults(cfg.Store.Config().Replicas)
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = cfg.Store.Config().LeaseTTL
	}
	s := &Service{
		cfg:      cfg,
		st:       cfg.Store,
		nc:       cfg.Conn,
		log:      cfg.Logger,
		now:      cfg.Now,
		states:   newStateCache(cfg.StateCacheSize),
		locks:    map[string]*sessionLock{},
		demand:   make(chan struct{}, cfg.MaxDemand),
		drops:    make(chan claimDrop, dropQueue),
		queued:   map[string]struct{}{},
		timers:   map[string]*wake{},
		lastPut:  map[string]time.Time{},
		expiries: map[string]time.Time{},
		warm:     map[string]warmLook{},
		born:     time.Now(),
		slots:    make(chan struct{}, cfg.Concurrency),
		waiters:  make(chan struct{}, cfg.Concurrency*waitingPerWorker),
		usage:    logstore.NewUsageCounter(cfg.Store, 0),
	}
	s.cond = sync.NewCond(&s.mu)
	s.room = sync.NewCond(&s.mu)
	s.out = newOutages(cfg.LeaseTTL, cfg.Grace)
	m, err := newMetrics(cfg.Registerer, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.urgent) + len(s.sweepQ))
	})
	if err != nil {
		return nil, fmt.Errorf("repairer: metrics: %w", err)
	}
	s.m = m
	return s, nil
}

// Ready returns nil once the endpoint is served and the lease watch runs.
func (s *Service) Ready() error {
	switch {
	case !s.ready.Load():
		return errors.New("repairer: not started")
	case !s.watching.Load():
		return errors.New("repairer: lease watch not running")
	case !s.nc.IsConnected():
		return fmt.Errorf("repairer: nats %s", s.nc.Status())
	}
	return nil
}

// Run serves until ctx is cancelled, then stops and returns nil. A repair
// cut short by the stop is harmless: its batch committed whole or not at
// all, and the next run plans the same events again.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("repairer: already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "sessionlog repairer: closes what dead holders left open",
		QueueGroup:  QueueGroup,
	})
	if err != nil {
		return fmt.Errorf("repairer: add service: %w", err)
	}
	reqCtx := context.WithoutCancel(ctx)
	if err := svc.AddEndpoint("repair", micro.HandlerFunc(func(r micro.Request) { s.dispatch(reqCtx, r, demandTimeout, s.handleRepair) }),
		micro.WithEndpointSubject(logstore.SubjectRepair)); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("repairer: endpoint: %w", err)
	}

	if s.cfg.GroupEvents > 1 {
		s.grouper.Store(newGrouper(s, ctx))
	}
	// The usage counter stops after every repair has returned, and adds
	// what it holds then.
	uctx, ustop := context.WithCancel(context.WithoutCancel(ctx))
	udone := make(chan struct{})
	go func() {
		defer close(udone)
		s.usage.Run(uctx)
	}()
	defer func() { ustop(); <-udone }()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.evaluateLoop(ctx)
	}()
	s.out.start(s.now())
	watchUp := make(chan struct{})
	s.wg.Add(4)
	go func() {
		defer s.wg.Done()
		s.dropLoop(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.probeLoop(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.watchLoop(ctx, watchUp)
	}()
	go func() {
		defer s.wg.Done()
		// The first sweep starts once the watch runs, so an expiry falls
		// either before the sweep's listing (found by it) or after the
		// watch started (seen by it).
		select {
		case <-watchUp:
		case <-ctx.Done():
			return
		}
		s.sweepLoop(ctx)
	}()
	wire.Subscribed(s.nc, s.log)
	s.ready.Store(true)
	s.log.Info("repairer running", "grace", s.cfg.Grace, "lease_ttl", s.cfg.LeaseTTL,
		"sweep", s.cfg.SweepInterval, "concurrency", s.cfg.Concurrency)

	<-ctx.Done()
	s.ready.Store(false)
	err = svc.Stop()
	s.mu.Lock()
	s.stopping = true
	for id, w := range s.timers {
		w.t.Stop()
		delete(s.timers, id)
	}
	s.cond.Broadcast()
	s.room.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	if err != nil {
		s.log.Warn("repairer: stop", "err", err)
	}
	return nil
}

// watchLoop follows SESSION_LEASES: renewals date the next expiry, delete
// and expiry markers schedule an evaluation after the grace period. If the
// watch breaks it is re-created and a sweep covers what it may have missed.
func (s *Service) watchLoop(ctx context.Context, up chan struct{}) {
	first := true
	for ctx.Err() == nil {
		w, err := s.st.WatchLeases(ctx)
		if err != nil {
			s.log.Warn("repairer: lease watch", "err", err)
			s.watching.Store(false)
			if ctx.Err() == nil {
				s.outageFailed(srcWatch, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryBackoff):
			}
			continue
		}
		s.watching.Store(true)
		s.mu.Lock()
		s.epoch++ // changes while no watch ran went unseen
		s.mu.Unlock()
		s.outageOK(srcWatch)
		if first {
			close(up)
			first = false
		} else {
			go s.sweep(ctx)
		}
		s.follow(ctx, w)
		_ = w.Stop()
		s.watching.Store(false)
		if ctx.Err() == nil {
			// Renewals and expiries went unseen until it runs again.
			s.outageFailed(srcWatch, errors.New("lease watch closed"))
		}
	}
}

func (s *Service) follow(ctx context.Context, w *logstore.LeaseWatch) {
	for {
		c, ok := w.Next(ctx)
		if !ok {
			if ctx.Err() == nil {
				s.log.Warn("repairer: lease watch closed; restarting it")
			}
			return
		}
		switch {
		case c.Renewed:
			s.onRenewed(c.SessionID, c.At)
		case c.Ended:
			s.onLeaseEnded(c.SessionID, c.At)
		default:
			s.onLeaseGone(c.SessionID, c.At, c.Revision)
		}
	}
}

// onRenewed notes a renewal and arms the session's evaluation at the
// lease's known expiry plus the grace period: the server's expiry marker
// can arrive a few hundred ms after the TTL ran out, and the evaluation
// confirms against the leader's last lease entry that no renewal came
// since (check). A later renewal moves the wake-up.
func (s *Service) onRenewed(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastPut[id] = at
	delete(s.expiries, id)
	delete(s.warm, id)
	if w, ok := s.timers[id]; ok {
		w.t.Stop()
		delete(s.timers, id)
	}
	// The first look comes up to warmLead before the grace period ends
	// (with a grace shorter than that, up to half a TTL before the
	// expiry: a live holder renews every TTL/3, so it seldom comes for
	// one, and then only reads): it finds the lease not yet due, and its read of the session's
	// state, kept in the cache, leaves only the tail to read when it is
	// due. Many leases lapsing together then do their reads before they
	// are due, not all at that moment (a burst that took longer to read
	// than the grace period was still reading when its repairs were due;
	// on R3 under load the first looks of 1,000 sessions took over a
	// second, and those still reading at their due time were repaired up
	// to a second late).
	lead := min(s.cfg.Grace+s.cfg.LeaseTTL/2, warmLead)
	s.wakeAtLocked(id, at.Add(s.cfg.LeaseTTL+s.cfg.Grace-lead), triggerExpiry)
}

// onLeaseGone dates the expiry (the last renewal + TTL when this process
// saw it: the marker itself can be written a little late) and wakes the
// session's evaluation when the grace period ends.
func (s *Service) onLeaseGone(id string, marker time.Time, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.warm[id]; ok && rev > w.rev {
		if put, seen := s.lastPut[id]; w.epoch == s.epoch && (!seen || !put.After(w.stored)) {
			// The marker follows the entry the first look read (the
			// watch ran all along and saw no renewal after it): the
			// lease is gone at the marker's revision.
			w.rev = rev
			s.warm[id] = w
		} else {
			delete(s.warm, id)
		}
	}
	at := marker
	if put, ok := s.lastPut[id]; ok {
		if exp := put.Add(s.cfg.LeaseTTL); exp.Before(marker) {
			at = exp
		}
		delete(s.lastPut, id)
	}
	s.expiries[id] = at
	s.wakeAtLocked(id, at.Add(s.cfg.Grace), triggerExpiry)
}

// onLeaseEnded handles a lease a repairer ended (logstore.EndLease) before
// its repair. This process's own evaluation of the session, still running,
// decides alone. Another replica's is looked at again once a TTL and the
// grace period have passed, in case it stopped before its repair
// committed.
func (s *Service) onLeaseEnded(id string, at time.Time) {
	s.lmu.Lock()
	_, evaluating := s.locks[id]
	s.lmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	// The renewal seen last is gone with the lease: no marker will come
	// for it to date.
	delete(s.lastPut, id)
	if evaluating {
		return
	}
	delete(s.warm, id)
	s.wakeAtLocked(id, at.Add(s.cfg.LeaseTTL+s.cfg.Grace), triggerExpiry)
}

func (s *Service) wakeAt(id string, at time.Time, why trigger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeAtLocked(id, at, why)
}

// wakeAtLocked queues id at time at. An earlier wake-up already set stays:
// every evaluation derives what to do from the stored state and sets the
// next wake-up itself.
func (s *Service) wakeAtLocked(id string, at time.Time, why trigger) {
	if s.stopping {
		return
	}
	d := at.Sub(s.now())
	if d <= 0 {
		s.enqueueLocked(item{id, why})
		return
	}
	if w, ok := s.timers[id]; ok {
		if !w.at.After(at) {
			return
		}
		w.t.Stop()
	}
	w := &wake{at: at}
	w.t = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.timers[id] == w {
			delete(s.timers, id)
		}
		s.enqueueLocked(item{id, why})
	})
	s.timers[id] = w
}

func (s *Service) enqueueLocked(it item) {
	if s.stopping {
		return
	}
	if _, ok := s.queued[it.id]; ok {
		return
	}
	s.queued[it.id] = struct{}{}
	if it.why == triggerExpiry {
		s.stage(it.id, StageQueued)
	}
	if it.why == triggerSweep {
		s.sweepQ = append(s.sweepQ, it)
	} else {
		s.urgent = append(s.urgent, it)
	}
	s.cond.Signal()
}

func (s *Service) next() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.urgent) == 0 && len(s.sweepQ) == 0 {
		if s.stopping {
			return item{}, false
		}
		s.cond.Wait()
	}
	if s.stopping {
		return item{}, false
	}
	q := &s.urgent
	if len(*q) == 0 {
		q = &s.sweepQ
	}
	if q == &s.sweepQ {
		s.room.Signal()
	}
	it := (*q)[0]
	(*q)[0] = item{}
	*q = (*q)[1:]
	if len(*q) == 0 {
		*q = nil // let a drained backlog's array go
	}
	delete(s.queued, it.id)
	return it, true
}

func (s *Service) sweepLoop(ctx context.Context) {
	s.sweep(ctx)
	if s.cfg.SweepInterval < 0 {
		return
	}
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sweep(ctx)
		}
	}
}

// sweep queues every claimed session: only those can be orphaned. It
// waits for room in the queue (Config.SweepQueue) before each.
func (s *Service) sweep(ctx context.Context) {
	n := 0
	err := s.st.ClaimedSessions(ctx, func(id string) {
		s.mu.Lock()
		for len(s.sweepQ) >= s.cfg.SweepQueue && !s.stopping {
			s.room.Wait()
		}
		s.enqueueLocked(item{id, triggerSweep})
		s.mu.Unlock()
		n++
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("repairer: sweep", "err", err)
			s.outageFailed(srcProbe, err)
		}
		return
	}
	s.log.Debug("repairer: sweep queued", "sessions", n)
}

// claimDrop is the claim of a repaired session, at the revision the
// repair was decided with.
type claimDrop struct {
	id  string
	rev uint64
}

// dropClaim has the claim of a repaired session dropped, by dropLoop. A
// repair's latency ends at its commit; the claim's delete, one write per
// session, is taken off that path so a burst of repairs is not slowed by
// as many writes to the claim bucket. A claim the process stops before
// dropping stays: the next sweep finds the session repaired (nothing
// open) and leaves it.
func (s *Service) dropClaim(ctx context.Context, id string, rev uint64) {
	select {
	case s.drops <- claimDrop{id, rev}:
	default:
		s.dropNow(ctx, claimDrop{id, rev})
	}
}

// dropLoop drops queued claims one at a time until ctx ends. While
// repairs are on their way to their commits it holds the drops back (up
// to dropHold): a burst of repairs then does not share the server with as
// many claim writes.
func (s *Service) dropLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-s.drops:
			s.quiet(ctx, dropHold)
			s.dropNow(ctx, d)
		}
	}
}

// dropHold bounds how long dropLoop holds a claim's drop back for repairs
// in flight.
const dropHold = 2 * time.Second

// quiet waits until no repair is between its decision and its commit, at
// most max.
func (s *Service) quiet(ctx context.Context, max time.Duration) {
	if s.repairing.Load() == 0 {
		return
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(max)
	for s.repairing.Load() > 0 && time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) dropNow(ctx context.Context, d claimDrop) {
	if err := s.heard(fromClaims, s.st.DropClaim(ctx, d.id, d.rev)); err != nil && ctx.Err() == nil {
		s.log.Debug("repairer: claim kept", "session", d.id, "err", err)
	}
}

type sessionLock struct {
	mu   sync.Mutex
	refs int
}

// lock serializes the evaluations of one session in this process; call
// the result to unlock.
func (s *Service) lock(id string) (unlock func()) {
	s.lmu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &sessionLock{}
		s.locks[id] = l
	}
	l.refs++
	s.lmu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.lmu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.lmu.Unlock()
	}
}
