package logstore

import (
	"context"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/natsreq"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Defaults.
const (
	DefaultDuplicates = 2 * time.Minute
	DefaultLeaseTTL   = 30 * time.Second
	// DefaultTailCacheSize bounds the tails kept per session, as the
	// writer's and repairer's state caches are bounded (10,000): at
	// 100,000 it held every session of bench scale, some 70 MiB of the
	// writer's peak RSS and of the repairer's.
	DefaultTailCacheSize = 10_000
	// DefaultMaxInflightBatches stays below the server's default limit of
	// 50 open atomic batches per stream (error 10210).
	DefaultMaxInflightBatches = 40
	DefaultResolveAttempts    = 5
	DefaultRequestTimeout     = 5 * time.Second
)

// Config configures a Store.
type Config struct {
	// Replicas of the SESSIONS stream and the lease bucket: 1 embedded, 3 in a cluster.
	Replicas int
	// Partitions is the number of session streams (DESIGN.md section 11).
	// When set it must equal the count recorded in the store; 0 takes the
	// recorded count (1 for a store not provisioned yet): the operator
	// tools, which read whatever the store holds.
	Partitions int
	Duplicates time.Duration
	LeaseTTL   time.Duration
	// MaxEventBytes bounds one event's envelope; the stream's MaxMsgSize
	// is set a little above it for headers.
	MaxEventBytes int
	TailCacheSize int
	// MaxInflightBatches bounds concurrent atomic batches from this store.
	MaxInflightBatches int
	// ResolveAttempts is how often an append with no answer is re-sent
	// (same message ids) before it is reported outcome_unknown.
	ResolveAttempts int
	RequestTimeout  time.Duration
	// NoProvision skips creating or updating the stream and bucket
	// (services that must not hold stream-admin rights).
	NoProvision bool
	Logger      *slog.Logger
	// FaultHook injects faults in tests (see FaultStage); nil in production.
	FaultHook func(FaultStage) error
	// NoGroupCommit sends every append as its own publish or batch,
	// instead of gathering the appends of different sessions that wait at
	// once into one atomic batch (commit.go).
	NoGroupCommit bool
	// CannotStore, if set, says why the server cannot store messages now
	// (its disk is full), nil when it can: an append is then refused at
	// once with not_committed, nothing sent, instead of being sent to
	// time out. `sessionlog up` sets it from its embedded server's health.
	CannotStore func() error
	// SealBodies seals the bodies of the events this store writes, each
	// session's with its own key (seal.go, docs/adr/011-sealed-bodies.md),
	// so that an erase destroys the key and purges the subject instead of
	// overwriting each message. Off (the default): bodies are stored as
	// they are. Reads open sealed bodies either way.
	SealBodies bool
	// KeyCacheSize: how many sessions' keys the store keeps in memory.
	KeyCacheSize int
	// plain keeps a store of this package's tests plain in a build with
	// the tag sealforced (SealForced): set only by a test that needs
	// plain bodies (export_test.go, Plain).
	plain bool
}

func (c *Config) defaults() {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Duplicates <= 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = schema.DefaultMaxEventBytes
	}
	if c.TailCacheSize <= 0 {
		c.TailCacheSize = DefaultTailCacheSize
	}
	if c.MaxInflightBatches <= 0 {
		c.MaxInflightBatches = DefaultMaxInflightBatches
	}
	if c.ResolveAttempts <= 0 {
		c.ResolveAttempts = DefaultResolveAttempts
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.KeyCacheSize <= 0 {
		c.KeyCacheSize = DefaultKeyCacheSize
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is the JetStream adapter. It is safe for concurrent use.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    Config
	layout Layout
	kv     jetstream.KeyValue
	claims jetstream.KeyValue
	sem    chan struct{}
	tails  *lru.Cache[string, Tail]
	// judged holds, per session, the last event of the prefix a judge
	// last found readable from the session's start, one message per seq
	// (judged.go), with the session's first stored message then.
	judged *lru.Cache[string, JudgedPrefix]
	log    *slog.Logger
	// replies carries the answers of one-event publishes.
	replies *natsreq.Slots
	// erased is SESSION_ERASED, opened on first use.
	erased lazyBucket
	// keys caches sessions' data keys (seal.go); keysBucket is
	// SESSION_KEYS, opened on first use.
	keys       *lru.Cache[string, cipher.AEAD]
	keysBucket lazyBucket
	// sources is SESSION_SOURCES, opened on first use.
	sources lazyBucket
	// snapshots is SESSION_SNAPSHOTS, opened on first use.
	snapshots lazyBucket
	// usage is TENANT_USAGE, opened on first use.
	usage lazyBucket
	// lostKept is LostBucket, opened on first use (lostkept.go).
	lostKept lazyBucket
	// committers gather each stream's appends (commit.go).
	commitMu                   sync.Mutex
	committers                 map[string]*committer
	groupBatches, groupAppends atomic.Uint64
	groupRefused               atomic.Uint64
	// purgeRefused: a Shred's purge was refused (said once a store).
	purgeRefused atomic.Bool
	// purgeMu: one purge at a time between its publish and the answer
	// to its flush (purgeSubject); shreds counts what Shreds did.
	purgeMu sync.Mutex
	shreds  shredCounters
}

// StreamConfig is the configuration of one session stream of the contract
// (SESSIONS, or SESSIONS-<p> when the layout has partitions).
func StreamConfig(cfg Config, l Layout, stream string) jetstream.StreamConfig {
	cfg.defaults()
	return jetstream.StreamConfig{
		Name:               stream,
		Subjects:           l.streamSubjects(stream),
		Storage:            jetstream.FileStorage,
		Replicas:           cfg.Replicas,
		Duplicates:         cfg.Duplicates,
		AllowAtomicPublish: true,
		AllowDirect:        true,
		// Erasure (DESIGN.md section 14) deletes messages: the stream
		// allows it, and the NATS permissions allow it only to the eraser
		// (the repairer) and the operator (deploy/nats/perms.go).
		DenyDelete:        false,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxAge:            0,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        int32(cfg.MaxEventBytes + 64<<10),
		Discard:           jetstream.DiscardNew,
		Retention:         jetstream.LimitsPolicy,
	}
}

// Open connects the adapter to nc and, unless cfg.NoProvision, creates or
// updates the streams and buckets (idempotent). It first compares
// cfg.Partitions with the count recorded in the store and, when they
// differ, returns a *PartitionsError having created nothing.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	cfg.defaults()
	if SealForced && !cfg.plain {
		cfg.SealBodies = true
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(cfg.RequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	tails, err := lru.New[string, Tail](cfg.TailCacheSize)
	if err != nil {
		return nil, fmt.Errorf("logstore: tail cache: %w", err)
	}
	judged, err := lru.New[string, JudgedPrefix](cfg.TailCacheSize)
	if err != nil {
		return nil, fmt.Errorf("logstore: judged cache: %w", err)
	}
	keys, err := lru.New[string, cipher.AEAD](cfg.KeyCacheSize)
	if err != nil {
		return nil, fmt.Errorf("logstore: key cache: %w", err)
	}
	s := &Store{
		nc: nc, js: js, cfg: cfg,
		keys:    keys,
		sem:     make(chan struct{}, cfg.MaxInflightBatches),
		tails:   tails,
		judged:  judged,
		log:     cfg.Logger,
		replies: natsreq.New(nc, natsreq.DefaultMax),

		committers: map[string]*committer{},
	}
	if err := s.choosePartitions(ctx); err != nil {
		return nil, err
	}
	if !cfg.NoProvision {
		if err := s.provision(ctx); err != nil {
			return nil, err
		}
		// Best effort: a store whose leaders stay together still works.
		if n, err := s.SpreadLeaders(ctx); err != nil {
			s.log.Warn("logstore: spreading the partitions' leaders", "err", err)
		} else if n > 0 {
			s.log.Info("logstore: moved partition leaders to spread them over the nodes", "moved", n)
		}
	}
	if s.kv, err = js.KeyValue(ctx, LeaseBucket); err != nil {
		return nil, fmt.Errorf("logstore: lease bucket: %w", err)
	}
	if s.claims, err = js.KeyValue(ctx, ClaimBucket); err != nil {
		return nil, fmt.Errorf("logstore: claim bucket: %w", err)
	}
	return s, nil
}

func (s *Store) provision(ctx context.Context) error {
	if err := s.recordPartitions(ctx); err != nil {
		return err
	}
	for _, name := range s.layout.Streams() {
		cfg := StreamConfig(s.cfg, s.layout, name)
		if st, err := s.js.Stream(ctx, name); err == nil && st.CachedInfo().Config.DenyDelete {
			// A stream made before erasure existed denies deletes, and the
			// server never lets an update lift that: keep it, and say that
			// its sessions cannot be erased.
			cfg.DenyDelete = true
			s.log.Warn("logstore: stream denies message deletes (made before erasure): sessions.api.erase cannot remove its events; copy the log into a new stream to enable it", "stream", name)
		}
		if _, err := s.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("logstore: provision stream %s: %w", name, err)
		}
	}
	// Per-key TTLs need limit markers; the marker TTL is how long a watcher
	// can still see that a lease expired.
	if _, err := s.provisionBucket(ctx, LeaseBucket, "sessionlog session leases: key = session id, per-key TTL = lease TTL", leaseMarkerTTL); err != nil {
		return err
	}
	if err := s.provisionKV(ctx, ClaimBucket, "sessionlog: sessions whose liveness a holder has claimed (no TTL)"); err != nil {
		return err
	}
	if err := s.provisionKV(ctx, SourceBucket, "sessionlog: agent transcripts by project (source endpoints, DESIGN.md section 15)"); err != nil {
		return err
	}
	if err := s.provisionKV(ctx, SnapshotBucket, "sessionlog writer: snapshots of sessions' folded state (key = session id; parts <id>.<part>.<n>)"); err != nil {
		return err
	}
	if err := s.provisionKV(ctx, LostBucket, lostBucketDescription); err != nil {
		return err
	}
	if err := s.provisionUsage(ctx); err != nil {
		return err
	}
	if err := s.provisionKeys(ctx); err != nil {
		return err
	}
	return s.provisionErasure(ctx)
}

// Config returns the effective configuration.
func (s *Store) Config() Config { return s.cfg }

// Layout is the store's partition layout.
func (s *Store) Layout() Layout { return s.layout }

// Locate maps a session id to its stream and subject in this store.
func (s *Store) Locate(sessionID string) (Location, error) { return s.layout.Locate(sessionID) }

// Streams lists every stream of this store that holds sessions.
func (s *Store) Streams() []string { return s.layout.Streams() }

// Tail is the last event of a session as the stream leader has it.
type Tail struct {
	// Seq is the session seq (envelope seq) of the last event, 0 if none.
	Seq uint64
	// StreamSeq is the stream sequence of that event: the value of
	// Nats-Expected-Last-Subject-Sequence for the next append.
	StreamSeq uint64
	EventID   string
	// Hash is ChainHash of that event's stored body: the SL-Prev of the
	// session's next event.
	Hash string
}

// Exists reports whether the session has any event.
func (t Tail) Exists() bool { return t.StreamSeq > 0 }

type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

type msgGetResponse struct {
	Type    string              `json:"type"`
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *storedMsg          `json:"message,omitempty"`
}

// Msg is one stored event as read from the stream.
type Msg struct {
	StreamSeq uint64
	Subject   string
	Header    nats.Header
	Data      []byte
	// Pending: messages a Follower had yet to deliver after this one.
	Pending uint64
	// Stored: when the stream stored it (set by a Follower).
	Stored time.Time
	// Unopened: a Follower's message whose sealed body does not open
	// (code unreadable), or one of StoredPage's that does not open or
	// whose key is gone (ErrKeyGone); Data is then nil. The follower goes
	// on past it, as past a body that does not decode; an erase deletes
	// it.
	Unopened error
}

// msgGet asks the stream leader ($JS.API.STREAM.MSG.GET, never Direct Get,
// which any replica answers and which can be stale on R3).
func (s *Store) msgGet(ctx context.Context, stream string, req msgGetRequest) (*Msg, error) {
	sm, h, err := s.msgGetStored(ctx, stream, req)
	if sm == nil || err != nil {
		return nil, err
	}
	m := &Msg{StreamSeq: sm.Sequence, Subject: sm.Subject, Header: h, Data: sm.Data}
	return m, s.open(ctx, m)
}

// msgGetStored is msgGet's answer as the leader gives it (its stored time
// too), with its headers decoded; nil, nil when there is no such message.
func (s *Store) msgGetStored(ctx context.Context, stream string, req msgGetRequest) (*storedMsg, nats.Header, error) {
	b, _ := json.Marshal(req)
	// One request, bounded by the request timeout even under a longer
	// deadline: a reply lost with a paused leader never comes.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	reply, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, b)
	if err != nil {
		return nil, nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, nil, fmt.Errorf("logstore: msg get: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil, nil
		}
		return nil, nil, resp.Error
	}
	if resp.Message == nil {
		return nil, nil, jetstream.ErrInvalidJetStreamResponse
	}
	var h nats.Header
	if len(resp.Message.Header) > 0 {
		if h, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, nil, fmt.Errorf("logstore: msg get headers: %w", err)
		}
	}
	return resp.Message, h, nil
}

func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

func tailOf(sessionID string, m *Msg) (Tail, error) {
	if m == nil {
		return Tail{}, nil
	}
	seq, err := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
	if err != nil {
		// Fall back to the body for events stored without SL-Seq.
		e, derr := schema.Decode(m.Data)
		if derr != nil {
			// Not an event: the session is unreadable, which no retry
			// changes; the verdict is Judge's (ReadJudged reads up to it
			// to name the first bad message).
			_, err := (&Judge{SessionID: sessionID}).Judged(m, &e, derr)
			return Tail{}, err
		}
		seq = e.Seq
	}
	return Tail{Seq: seq, StreamSeq: m.StreamSeq, EventID: eventIDOf(m.Header.Get(HeaderMsgID)), Hash: ChainHash(m.Data)}, nil
}

func eventIDOf(msgID string) string {
	for i := 0; i < len(msgID); i++ {
		if msgID[i] == ':' {
			return msgID[i+1:]
		}
	}
	return msgID
}

// Tail reads the session's last event from the stream leader. A last
// message that is not the session's event fails it with its verdict (an
// *UnreadableError); TailPosition answers where that message is.
func (s *Store) Tail(ctx context.Context, sessionID string) (Tail, error) {
	t, _, err := s.lastTail(ctx, sessionID)
	return t, err
}

// lastTail is Tail's read, with the last stored message it read (nil
// when there is none or the read failed; with a sealed body whose key is
// gone, the message without its body's opening).
func (s *Store) lastTail(ctx context.Context, sessionID string) (Tail, *Msg, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return Tail{}, nil, err
	}
	m, err := s.msgGet(ctx, loc.Stream, msgGetRequest{LastFor: loc.Subject})
	if err != nil {
		return Tail{}, m, fmt.Errorf("logstore: tail %s: %w", sessionID, err)
	}
	t, err := tailOf(sessionID, m)
	if err == nil {
		s.tails.Add(sessionID, t)
	}
	return t, m, err
}

// TailPosition reads the session's last stored message from the stream
// leader, as Tail does, and answers where it is whatever it is, with its
// verdict: when it is the session's event, Tail's answer and a nil
// verdict; otherwise its position (StreamSeq, and Seq the seq it claims,
// 0 when none: UnreadableError.GotSeq; no EventID or Hash) and Tail's
// *UnreadableError on it (a body that is not an event, a sealed body that
// does not open, an event of a newer schema without SL-Seq). A caller
// that goes on past such a message (a follow that ends at it, an erase
// that deletes it) takes the position and decides on the verdict; Tail
// refuses it.
//
// A sealed last message whose session key is gone reads as erased for
// every reader: err is then ErrKeyGone (wrapped), and the Tail beside it
// is still the message's position (StreamSeq, and Seq the SL-Seq it is
// stored with, 0 when none), so that a caller that deletes it needs no
// read of its own; a caller that serves it answers erased on err. err is
// any other failure, as Tail's, with no position.
func (s *Store) TailPosition(ctx context.Context, sessionID string) (Tail, *UnreadableError, error) {
	t, m, err := s.lastTail(ctx, sessionID)
	return tailPosition(t, m, err)
}

// tailPosition is TailPosition's answer for Tail's (t, err) on the last
// stored message m.
func tailPosition(t Tail, m *Msg, err error) (Tail, *UnreadableError, error) {
	var ue *UnreadableError
	if errors.As(err, &ue) && ue.StreamSeq > 0 {
		return Tail{Seq: ue.GotSeq, StreamSeq: ue.StreamSeq}, ue, nil
	}
	if m != nil && errors.Is(err, ErrKeyGone) {
		seq, _ := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
		return Tail{Seq: seq, StreamSeq: m.StreamSeq}, nil, err
	}
	return t, nil, err
}

// CachedTail returns the tail this store last saw for a session, if any.
// It may be stale when another process appended since; the per-subject
// check catches that and Append drops the entry.
func (s *Store) CachedTail(sessionID string) (Tail, bool) { return s.tails.Get(sessionID) }

// ForgetTail drops the cached tail of a session.
func (s *Store) ForgetTail(sessionID string) { s.tails.Remove(sessionID) }

// NextAfter returns the first stored message of the session with stream
// sequence > after, from the leader; nil when there is none.
func (s *Store) NextAfter(ctx context.Context, sessionID string, after uint64) (*Msg, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	return s.msgGet(ctx, loc.Stream, msgGetRequest{Seq: after + 1, NextFor: loc.Subject})
}

// MsgAt returns the stored message at a stream sequence, from the leader.
func (s *Store) MsgAt(ctx context.Context, stream string, seq uint64) (*Msg, error) {
	if s.cfg.FaultHook != nil && s.cfg.FaultHook(FaultMsgAt) != nil {
		return nil, nil
	}
	return s.msgGet(ctx, stream, msgGetRequest{Seq: seq})
}

// FaultMsgAt runs before MsgAt reads: a non-nil error from the hook makes
// the read find nothing, as a former leader cut off by a partition
// answers for a message stored after it lost touch.
const FaultMsgAt FaultStage = "msg-at"

// LastStreamSeq is the stream's last sequence (for catch-up checks).
func (s *Store) LastStreamSeq(ctx context.Context, stream string) (uint64, error) {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// ErrStop ends a ReadSession walk early without error.
var ErrStop = errors.New("logstore: stop")
