package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

const (
	// lingerBehind: how long a projector that is behind waits for the
	// next message before committing a partial batch.
	lingerBehind = 20 * time.Millisecond
	// holdChunk: how long a consumer holds a partial chunk for the
	// messages its consumer says are pending before handing it over.
	holdChunk = 50 * time.Millisecond
	// chunkMsgs: the consumer hands the fold loop the messages it read
	// in chunks of up to this many (fewer when nothing more is pending):
	// one channel operation, and at most one wake-up of the other
	// goroutine, per chunk rather than per message.
	chunkMsgs = 128
)

// Config configures the projector.
type Config struct {
	Store *logstore.Store
	// Conn, when set, carries the dashboard's actions (resume, repair,
	// fork, export) as sessions.api.* requests; without it they answer
	// internal.
	Conn *nats.Conn
	// Operator, when set, is a connection with the operator's rights
	// (sessions.api.erase, DESIGN.md section 14) that carries the
	// dashboard's erase; without it the dashboard's erase is refused
	// (forbidden).
	Operator *nats.Conn
	// DataDir holds the Pebble store.
	DataDir    string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on /metrics by Handler.
	Gatherer prometheus.Gatherer
	Now      func() time.Time
	// HTTPToken, when set, is required on every path but /healthz and
	// /readyz, by the rule of package httpauth.
	HTTPToken string
	// TenantTokens maps each tenant's token to what it names, TENANT or
	// TENANT:AGENT[,AGENT...] (ADR 010, httpauth.ParseTenantToken): a
	// request bearing one in its Authorization header sees only that
	// tenant's sessions (of those agents) and may not act (httpapi/tenant.go).
	// They need HTTPToken.
	TenantTokens map[string]string

	// MaxBatchEvents and MaxBatchBytes bound one Pebble batch while
	// catching up; a caught-up projector commits whatever has arrived.
	MaxBatchEvents int
	MaxBatchBytes  int
	// CacheSessions bounds the fold states kept in memory.
	CacheSessions int
	// SnapshotEvery: once caught up, a session's fold state is stored at
	// most this many events behind its summary (while catching up, further
	// apart for large states: see snapshotInterval).
	SnapshotEvery int
	// FetchBatch is the consumer's pull size.
	FetchBatch int
	// Heartbeat is the SSE comment interval.
	Heartbeat time.Duration
	// Watch bounds the memory of watch streams (zero values: defaults).
	Watch httpapi.WatchLimits
	// OnCommit, if set, is called after each committed batch (tests).
	OnCommit func(store.Checkpoint)
	// Observer, if set, sees each event the projector folds once it has
	// caught up (live export: sessionlog's OpenTelemetry traces), and
	// runs beside it.
	Observer Observer
}

// Observer sees the events the projector folds, in stream order per
// session, from the fold loop: Observe must never block it (queue and
// drop). Run runs until ctx ends.
type Observer interface {
	Observe(ev *schema.Envelope, streamSeq uint64)
	Run(ctx context.Context) error
}

// DefaultConfig holds the projector's defaults, the one place they are
// stated (the batch, cache, snapshot and fetch sizes chosen by measurement
// with `sessionlog bench catchup`): New gives each field left zero (a
// count or duration <= 0) its value here, and the commands' flags default
// to it. DataDir and the dependencies (Store, Conn) have none.
func DefaultConfig() Config {
	return Config{
		MaxBatchEvents: 20_000,
		MaxBatchBytes:  16 << 20,
		CacheSessions:  4096,
		SnapshotEvery:  64,
		FetchBatch:     2000,
		Heartbeat:      15 * time.Second,
		Watch:          httpapi.DefaultWatchLimits(),
	}
}

// withDefaults is c with DefaultConfig's value in each field left zero,
// and a logger, registry and clock where c has none.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxBatchEvents <= 0 {
		c.MaxBatchEvents = d.MaxBatchEvents
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = d.MaxBatchBytes
	}
	if c.CacheSessions <= 0 {
		c.CacheSessions = d.CacheSessions
	}
	if c.SnapshotEvery <= 0 {
		c.SnapshotEvery = d.SnapshotEvery
	}
	if c.FetchBatch <= 0 {
		c.FetchBatch = d.FetchBatch
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = d.Heartbeat
	}
	c.Watch = c.Watch.WithDefaults()
	return c
}

type metrics struct {
	applied  prometheus.Counter
	skipped  *prometheus.CounterVec
	marked   *prometheus.CounterVec
	restores prometheus.Counter
	rebuilds prometheus.Counter
	lag      prometheus.Gauge
	position prometheus.Gauge
	batch    prometheus.Histogram
	batchEv  prometheus.Histogram
	repairs  prometheus.Counter
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessionlog_projector_events_applied_total", Help: "Events folded into the views."}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessionlog_projector_events_skipped_total", Help: "Stream messages not folded, by reason (duplicate, stopped, bad_subject, erased)."}, []string{"reason"}),
		marked:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessionlog_projector_sessions_stopped_total", Help: "Sessions whose folding stopped, by status (unreadable, gap)."}, []string{"status"}),
		restores: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessionlog_projector_state_restores_total",
			Help: "Fold states re-read from the log after their snapshot (cache misses)."}),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessionlog_projector_rebuilds_total", Help: "Rebuilds of the views from the start of the stream."}),
		lag:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionlog_projector_lag_messages", Help: "Stream messages not yet folded."}),
		position: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionlog_projector_stream_seq", Help: "Last stream sequence folded."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessionlog_projector_apply_seconds", Help: "Time to fold and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		batchEv: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessionlog_projector_batch_events", Help: "Events per committed batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9)}),
		repairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessionlog_projector_repairs_folded_total", Help: "repair/applied events folded."}),
	}
	for _, c := range []prometheus.Collector{m.applied, m.skipped, m.marked, m.restores, m.rebuilds, m.lag, m.position, m.batch, m.batchEv, m.repairs} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("projector: metrics: %w", err)
		}
	}
	return m, nil
}

// StartMode says how the projector found its store.
type StartMode struct {
	// Rebuild is true when the views are rebuilt from the start of the
	// stream; Reason says why ("empty" for a new store).
	Rebuild bool
	Reason  string
	// From is the checkpoint it resumes after.
	From store.Checkpoint
}

// Service is the projector.
type Service struct {
	cfg Config
	log *slog.Logger
	// ls is the log (Config.Store; a log in memory in the rule scripts).
	ls   followLog
	db   *store.DB
	met  *metrics
	mode StartMode
	f    *folder

	cu       catchUp
	running  atomic.Bool
	closed   atomic.Bool
	closeMu  sync.RWMutex
	errState atomic.Value // last fatal error, for /readyz

	// http is the HTTP side (package httpapi), reading the views through
	// httpViews.
	http *httpapi.Server
	// er is the set of erased sessions (erase.go).
	er *erasures
	// rb watches the streams for a last sequence going backwards
	// (rollback.go); created is each stream's creation time at start.
	rb      *rollbacks
	created map[string]time.Time
}

// New opens the store, verifies its checkpoint against the stream (or
// wipes it for a rebuild), and returns a projector ready to Run.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.Store == nil {
		return nil, errors.New("projector: Config.Store is required")
	}
	return open(cfg, followsOf(cfg.Store), httpapi.LogOf(cfg.Store))
}

// open opens the store of cfg (its defaults filled in), verifies its
// checkpoint against the streams of ls (or wipes it for a rebuild) and
// returns a projector on ls ready to Run, with its HTTP side reading web
// (New's: Config.Store; none when web is nil: Rebuild's serves nothing).
func open(cfg Config, ls followLog, web httpapi.Log) (*Service, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("projector: Config.DataDir is required")
	}
	if len(cfg.TenantTokens) > 0 && cfg.HTTPToken == "" {
		return nil, errors.New("projector: tenant tokens need an operator token (Config.HTTPToken): without one every request is the operator's")
	}
	db, err := store.Open(cfg.DataDir, store.Options{})
	if err != nil {
		return nil, err
	}
	s, err := newService(cfg, ls, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	if web != nil {
		if s.http, err = newHTTP(s, web); err != nil {
			db.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.start(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// newService is the projector of cfg (its defaults filled in) on log ls
// and store db, not started (start), without its HTTP side (open's).
func newService(cfg Config, ls followLog, db *store.DB) (*Service, error) {
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	rb, err := newRollbacks(cfg.Registerer, ls, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, log: cfg.Logger, ls: ls, db: db, met: met, cu: catchUp{target: map[string]uint64{}}, rb: rb, created: map[string]time.Time{}, er: newErasures()}, nil
}

type streamInfo struct {
	last    uint64
	created time.Time
}

func (s *Service) streams(ctx context.Context) (map[string]streamInfo, error) {
	return streamInfos(ctx, s.ls)
}

// start decides between resuming and rebuilding.
func (s *Service) start(ctx context.Context) error {
	// A start during a leader election (a node restarting, a partition
	// healing) asks again until New's deadline, rather than exiting.
	infos, err := logstore.WhileUnreachable(ctx, 5*time.Second, nil, s.streams)
	if err != nil {
		return err
	}
	// What the stored checkpoint says was consumed, before a rebuild
	// forgets it: a stream that ends before it rolled back.
	if cp, ok, err := s.db.Checkpoint(); err == nil && ok {
		for _, p := range cp.Streams {
			if info, ok := infos[p.Name]; ok && p.Created.Equal(info.created) {
				s.rb.saw(store.Checkpoint{Streams: []store.StreamPos{p}})
				if info.last < p.Seq {
					s.rb.check(p.Name, info.last, p.Seq)
				} else {
					// The message consumed last must still be there: a
					// damaged block the server cut at the damage keeps
					// the stream's last sequence when the loss is not at
					// its end, or writers overtook it before this start.
					s.rb.checkStream(ctx, p.Name, info.last, p, time.Now())
				}
			}
		}
	}
	for name, info := range infos {
		s.created[name] = info.created
	}
	s.rb.checkLostDue(ctx, infos, time.Now())
	if r := s.rb.reason(); r != "" {
		s.log.Error("projector: the log rolled back", "reason", r)
	}
	mode, err := checkStore(s.db, infos)
	if err != nil {
		return err
	}
	if mode.Rebuild {
		if mode.Reason != "empty" {
			s.met.rebuilds.Inc()
			s.log.Warn("projector: rebuilding views from the start of the stream", "reason", mode.Reason)
		}
		if err := s.db.Wipe(); err != nil {
			return err
		}
	} else {
		s.log.Info("projector: resuming", "checkpoint", mode.From.Streams)
	}
	s.mode = mode
	pos, err := s.cu.from(ctx, s.ls, infos, mode)
	if err != nil {
		return err
	}
	s.f = newFolder(s.db, s.ls, s.met, s.cfg.CacheSessions, s.cfg.SnapshotEvery, pos)
	if o := s.cfg.Observer; o != nil {
		s.f.observe = func(ev *schema.Envelope, streamSeq uint64) {
			// Not cu.done, which waits for the batch to land: the
			// events after the batch that caught up are live.
			if !s.f.catchingUp {
				o.Observe(ev, streamSeq)
			}
		}
	}
	s.f.skip = s.er.has
	s.f.onLanded = s.landed
	s.cu.update(s.f, s.log, s.f.checkpoint())
	return nil
}

// checkStore verifies the stored checkpoint: right version, a checksum
// that matches a full scan of the views, and streams that still hold the
// position it names.
func checkStore(db *store.DB, infos map[string]streamInfo) (StartMode, error) {
	cp, ok, err := db.Checkpoint()
	if errors.Is(err, store.ErrCorruptCheckpoint) {
		return StartMode{Rebuild: true, Reason: "corrupt checkpoint"}, nil
	}
	if err != nil {
		return StartMode{}, err
	}
	sum, n, err := db.Scan()
	if err != nil {
		return StartMode{}, err
	}
	if !ok {
		if n == 0 {
			return StartMode{Rebuild: true, Reason: "empty"}, nil
		}
		return StartMode{Rebuild: true, Reason: "views without a checkpoint"}, nil
	}
	if cp.Version != Version() {
		return StartMode{Rebuild: true, Reason: fmt.Sprintf("version %s, want %s", cp.Version, Version())}, nil
	}
	if sum != cp.Checksum {
		return StartMode{Rebuild: true, Reason: fmt.Sprintf("checksum %016x does not match the views (%016x)", cp.Checksum, sum)}, nil
	}
	for _, p := range cp.Streams {
		info, ok := infos[p.Name]
		switch {
		case !ok:
			return StartMode{Rebuild: true, Reason: "stream " + p.Name + " is gone"}, nil
		case !p.Created.Equal(info.created):
			return StartMode{Rebuild: true, Reason: "stream " + p.Name + " was created again"}, nil
		case p.Seq > info.last:
			return StartMode{Rebuild: true, Reason: fmt.Sprintf("stream %s ends at %d, before the checkpoint %d", p.Name, info.last, p.Seq)}, nil
		}
	}
	db.SetChecksum(sum)
	return StartMode{From: cp}, nil
}

// Mode reports how the projector started.
func (s *Service) Mode() StartMode { return s.mode }

// DB is the read-model store (tests, verify).
func (s *Service) DB() *store.DB { return s.db }

// View runs fn on a consistent snapshot of the views, as the HTTP side
// reads them (tests): never while an erase scrubs and reopens the store;
// httpapi.ErrClosed once the projector stopped.
func (s *Service) View(fn func(store.Snapshot) error) error { return httpViews{s}.View(fn) }

// landed is told each batch the folder's commits landed.
func (s *Service) landed(cp store.Checkpoint) {
	s.rb.saw(cp)
	if s.http != nil { // nil: the rule scripts, which serve nothing
		s.http.Landed()
	}
	if len(cp.Streams) > 0 {
		s.met.position.Set(float64(cp.Streams[0].Seq))
	}
	s.cu.update(s.f, s.log, cp)
	if s.cfg.OnCommit != nil {
		s.cfg.OnCommit(cp)
	}
}

// Ready is nil once NATS is connected, the store open and the views have
// caught up with the stream as it was at start, and no stream rolled
// back (rollback.go).
func (s *Service) Ready() error {
	if r := s.rb.reason(); r != "" {
		// Said first: nothing else the projector does makes it whole.
		return errors.New("projector: " + r)
	}
	switch {
	case s.closed.Load():
		return errors.New("projector: stopped")
	case !s.ls.Connected():
		return errors.New("projector: NATS not connected")
	case !s.running.Load():
		return errors.New("projector: not running")
	case !s.cu.done.Load():
		return errors.New("projector: catching up")
	}
	if err, _ := s.errState.Load().(error); err != nil {
		return err
	}
	return nil
}

// Run folds the stream into the views until ctx is cancelled.
func (s *Service) Run(ctx context.Context) error {
	if s.closed.Load() {
		return errors.New("projector: Run after stop")
	}
	s.running.Store(true)
	var obs sync.WaitGroup
	if o := s.cfg.Observer; o != nil {
		octx, stop := context.WithCancel(ctx)
		defer obs.Wait()
		defer stop()
		obs.Go(func() {
			if err := o.Run(octx); err != nil && octx.Err() == nil {
				s.log.Error("projector: observer stopped", "err", err)
			}
		})
	}
	stopList := func() {}
	if s.cfg.Conn != nil {
		var err error
		if stopList, err = s.serveList(ctx); err != nil {
			s.running.Store(false)
			return err
		}
	}
	go s.http.Run(ctx)
	go every(ctx, rollbackEvery, func() { s.CheckStreams(ctx) })
	err := s.consume(ctx, nil)
	s.running.Store(false)
	stopList() // before the store closes: a list reads the views
	s.closeMu.Lock()
	s.closed.Store(true)
	cerr := s.db.Close()
	s.closeMu.Unlock()
	if err != nil {
		s.errState.Store(err)
		return err
	}
	return cerr
}

// bound is where a rebuild to a position stops folding a stream: no
// message past last is folded, and the stream is done once the fold is at
// enough (last, or below it when the stream holds nothing after enough:
// the message at last, and any before it, were erased since) or a message
// past last arrived.
type bound struct{ last, enough uint64 }

// consume runs the consumers and the fold loop. until, if set, ends it
// once every stream it names is done (rebuild to a position).
func (s *Service) consume(ctx context.Context, until map[string]bound) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan []msg, 2*s.cfg.FetchBatch/chunkMsgs+1)
	// spent takes the chunks the fold loop is done with back to the
	// consumers: a chunk with its decoded envelopes is tens of KiB,
	// allocated and zeroed anew for every chunkMsgs events otherwise.
	// Nothing keeps a message of a chunk it has handled (what the fold
	// and the observer keep of one they copy).
	spent := make(chan []msg, cap(ch)+2)
	errc := make(chan error, len(s.f.pos))
	var wg sync.WaitGroup
	for name, p := range s.f.pos {
		// A projector started during a fault waits for the cluster to
		// serve it instead of exiting. The consumer reads the whole
		// stream; its inactive threshold is nats.go's default for ordered
		// consumers, which the projector had before (Close deletes it).
		fol, err := s.ls.Follow(ctx, logstore.FollowSpec{
			Stream:            name,
			StartAfter:        p.Seq,
			PageEvents:        s.cfg.FetchBatch,
			InactiveThreshold: 5 * time.Minute,
			OnUnavailable: func(err error) {
				s.log.Warn("projector: JetStream unavailable; waiting", "stream", name, "err", err)
			},
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("projector: consumer %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer fol.Close()
			var chunk []msg
			// hold bounds how long a chunk waits for the messages the
			// consumer said were pending: a count that is not met (a
			// message deleted after it was counted) must not keep what is
			// here from the fold.
			var hold struct {
				ctx  context.Context
				stop context.CancelFunc
			}
			hold.stop = func() {}
			defer func() { hold.stop() }()
			for {
				nctx := ctx
				if len(chunk) > 0 {
					nctx = hold.ctx
				}
				lm, err := fol.Next(nctx)
				if err != nil && len(chunk) > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
					hold.stop()
					select {
					case ch <- chunk:
						chunk = nil
						continue
					case <-ctx.Done():
						return
					}
				}
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, logstore.ErrFollowerClosed) {
						errc <- fmt.Errorf("projector: consume %s: %w", name, err)
					}
					return
				}
				if chunk == nil {
					select {
					case c := <-spent:
						chunk = c[:0]
					default:
						chunk = make([]msg, 0, chunkMsgs)
					}
					// One deadline per chunk, not per message: a chunk
					// fills in well under it while the consumer has
					// messages to give.
					hold.ctx, hold.stop = context.WithTimeout(ctx, holdChunk)
				}
				chunk = append(chunk, msg{stream: name, streamSeq: lm.StreamSeq, subject: lm.Subject, header: lm.Header, data: lm.Data, pending: lm.Pending, unopened: lm.Unopened})
				// Reading the message here overlaps it with folding in
				// the other goroutine.
				chunk[len(chunk)-1].prepare()
				if len(chunk) < chunkMsgs && lm.Pending > 0 {
					// More is on its way (the consumer pulls pages ahead):
					// hand it over with what follows.
					continue
				}
				hold.stop()
				select {
				case ch <- chunk:
					chunk = nil
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.er.follow(ctx, s.ls, s.log)
	}()
	defer wg.Wait()
	defer cancel()

	var (
		chunk []msg // the messages in hand, chunk[next:] not yet folded
		next  int
	)
	// passed: the streams of until a message past its last arrived from.
	passed := map[string]bool{}
	rebuilt := func() bool {
		for name, b := range until {
			if p := s.f.pos[name]; !passed[name] && (p == nil || p.Seq < b.enough) {
				return false
			}
		}
		return true
	}
	// take makes c the chunk in hand and gives the one before back.
	take := func(c []msg) {
		if chunk != nil {
			select {
			case spent <- chunk:
			default:
			}
		}
		chunk, next = c, 0
	}
	for {
		if next == len(chunk) {
			// Nothing in hand: the batch in flight lands first (readiness
			// and OnCommit follow it). While catching up this is rare
			// (batches end within a chunk) and the batch has mostly
			// landed by then.
			if err := s.f.landed(); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return s.commit()
			case err := <-errc:
				s.commit()
				return err
			case id := <-s.er.ch:
				if err := s.erased(id); err != nil {
					return err
				}
				continue
			case c := <-ch:
				take(c)
			case <-s.cu.recheck():
				s.cu.lower(ctx, s.ls, s.f, s.log)
				continue
			}
		}
		start := time.Now()
		var m *msg
	batch:
		for {
			for next < len(chunk) {
				m = &chunk[next]
				next++
				if b, ok := until[m.stream]; ok && m.streamSeq > b.last {
					// Past the position: not folded, and nothing of this
					// stream after it is.
					if passed[m.stream] = true; rebuilt() {
						return s.commit()
					}
					continue
				}
				if err := s.f.handle(ctx, m); err != nil {
					if ctx.Err() != nil {
						// Stopped during a read the fold made (a gap
						// fill): the open batch is dropped and the next
						// start folds on from the last commit.
						return s.f.landed()
					}
					return err
				}
				if until != nil && rebuilt() {
					return s.commit()
				}
				if s.f.events >= s.cfg.MaxBatchEvents || s.f.bytes >= s.cfg.MaxBatchBytes {
					break batch
				}
			}
			select {
			case c := <-ch:
				take(c)
				continue
			default:
			}
			// Behind the stream (the consumer says more is pending) but
			// the next message is not here yet: wait a little for it
			// rather than commit a small batch, which would rewrite
			// every touched summary for a handful of events.
			if m.pending > 0 {
				t := time.NewTimer(lingerBehind)
				select {
				case c := <-ch:
					t.Stop()
					take(c)
					continue
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			}
			break
		}
		s.met.lag.Set(float64(m.pending))
		n := s.f.events
		if err := s.startCommit(); err != nil {
			return err
		}
		s.met.batch.Observe(time.Since(start).Seconds())
		s.met.batchEv.Observe(float64(n))
	}
}

// erased removes the views of session id, erased: the open batch is
// committed first (the fold loop's step when the erasure watch names an
// id, with nothing in hand).
func (s *Service) erased(id string) error {
	if err := s.commit(); err != nil {
		return err
	}
	return s.eraseViews(id)
}

// commit commits the open batch and waits for it to land.
func (s *Service) commit() error {
	if err := s.startCommit(); err != nil {
		return err
	}
	return s.f.landed()
}

// startCommit hands the open batch to the store; the fold loop goes on
// while it lands.
func (s *Service) startCommit() error {
	if !s.f.pending() {
		return nil
	}
	if s.f.catchingUp && s.cu.reaches(s.f.pos) {
		// The batch that catches up leaves no snapshot far behind.
		s.f.settle()
	}
	return s.f.flush()
}

// Handler serves the HTTP API, the dashboard, /healthz, /readyz and (with
// a Gatherer) /metrics (httpapi.Server.Handler).
func (s *Service) Handler() http.Handler { return s.http.Handler() }

// APIHandler is the API and the dashboard without /healthz, /readyz and
// /metrics, for a server that serves those itself (sessionlog up).
func (s *Service) APIHandler() http.Handler { return s.http.APIHandler() }
