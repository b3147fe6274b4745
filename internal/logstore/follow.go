package logstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Follow defaults.
const (
	DefaultFollowPageEvents = 1000
	// DefaultFollowInactive is how long the server keeps a follower's
	// consumer after its last pull if the delete of Close is lost. nats.go
	// keeps an ordered consumer 5 minutes by default, and a stream takes at
	// most 1000 consumers (nats-server 2.11+): followers that come and go
	// (watches, reads) would use them up and every read of the stream
	// would fail (err 10026).
	DefaultFollowInactive = 15 * time.Second
	// followHeartbeat and followExpiry: the server's idle heartbeat to a
	// Follower's pulls and how long each pull lasts (see Next).
	followHeartbeat = time.Second
	followExpiry    = 10 * time.Second
)

// FollowSpec says what a Follower reads: one stream, all of it or one
// subject, from a stream sequence or from now on.
type FollowSpec struct {
	Stream string
	// Subject, if set, filters the stream (a session's: Locate(id).Subject).
	Subject string
	// StartAfter: the first message delivered is the first after this
	// stream sequence (0: from the start). Ignored with OnlyNew.
	StartAfter uint64
	// OnlyNew: deliver only messages stored after Follow.
	OnlyNew bool
	// lastPerSubject delivers the last message of each subject first
	// (a bucket's keys); headersOnly leaves the bodies on the server.
	lastPerSubject, headersOnly bool
	// PageEvents bounds one pull of messages from the server (default
	// DefaultFollowPageEvents): what the follower holds ahead of its
	// reader, so a slow reader is paced, not buffered.
	PageEvents int
	// PageBytes, if set, bounds one pull in bytes too; it is raised to the
	// largest message the server takes plus headers (a pull smaller than
	// a message would wait for it forever).
	PageBytes int
	// InactiveThreshold (default DefaultFollowInactive).
	InactiveThreshold time.Duration
	// OnUnavailable, if set, makes Follow wait out JetStream being
	// unavailable (Unreachable) (a follower started during a fault, before the stream
	// has a leader, is answered 503 or not at all) instead of returning
	// the error; it is called before each wait (to log it). Other errors
	// are returned at once.
	OnUnavailable func(err error)
}

// ErrFollowerClosed: Next after Close, or after the connection closed.
var ErrFollowerClosed = errors.New("logstore: follower closed")

// Follower reads a stream in order, with an ordered consumer: either as a
// continuous flow (Next) or a page at a time (Fetch), not both. It is not
// safe for concurrent use, but Close may be called from any goroutine.
type Follower struct {
	s         *Store
	spec      FollowSpec
	pageBytes int
	cons      jetstream.Consumer
	it        jetstream.MessagesContext
}

// Follow starts a follower. Close it when done: that deletes its consumer
// on the server.
func (s *Store) Follow(ctx context.Context, spec FollowSpec) (*Follower, error) {
	if spec.PageEvents <= 0 {
		spec.PageEvents = DefaultFollowPageEvents
	}
	if spec.InactiveThreshold <= 0 {
		spec.InactiveThreshold = DefaultFollowInactive
	}
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       spec.StartAfter + 1,
		InactiveThreshold: spec.InactiveThreshold,
	}
	if spec.OnlyNew {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverNewPolicy, 0
	}
	if spec.lastPerSubject {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverLastPerSubjectPolicy, 0
	}
	cfg.HeadersOnly = spec.headersOnly
	if spec.Subject != "" {
		cfg.FilterSubjects = []string{spec.Subject}
	}
	f := &Follower{s: s, spec: spec}
	if spec.PageBytes > 0 {
		f.pageBytes = max(spec.PageBytes, int(s.nc.MaxPayload())+4<<10)
	}
	create := func(ctx context.Context) (jetstream.Consumer, error) {
		return s.js.OrderedConsumer(ctx, spec.Stream, cfg)
	}
	var err error
	if f.cons, err = StartFollow(ctx, "logstore", spec, create); err != nil {
		return nil, err
	}
	return f, nil
}

// StartFollow makes a follower of spec with create, as Follow makes its
// consumer: at once, or with spec.OnUnavailable while the log is
// unavailable (WhileUnreachable). Its error is ctx's once ctx ended, else
// create's, said as who's follow of the stream.
func StartFollow[T any](ctx context.Context, who string, spec FollowSpec, create func(ctx context.Context) (T, error)) (T, error) {
	var v T
	var err error
	if spec.OnUnavailable == nil {
		v, err = create(ctx)
	} else {
		v, err = WhileUnreachable(ctx, 0, spec.OnUnavailable, create)
	}
	if err != nil {
		var zero T
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, fmt.Errorf("%s: follow %s: %w", who, spec.Stream, err)
	}
	return v, nil
}

// Next returns the next message, waiting for it. Pulls of a page run
// ahead of the reader, no further. Msg.Pending is how many messages the
// consumer had yet to deliver after it.
func (f *Follower) Next(ctx context.Context) (*Msg, error) {
	if f.it == nil {
		opt := jetstream.PullMessagesOpt(jetstream.PullMaxMessages(f.spec.PageEvents))
		if f.pageBytes > 0 {
			opt = jetstream.PullMaxMessagesWithBytesLimit(f.spec.PageEvents, f.pageBytes)
		}
		// A consumer that sends nothing, neither messages nor heartbeats,
		// is found by two missed heartbeats and made again from where it
		// was. nats.go's 5 s heartbeat for ordered consumers let one on a
		// 3-node cluster hold a sweep of the claims still for over 5 s
		// (created, then nothing delivered); at 1 s it is found in 2.
		it, err := f.cons.Messages(opt, jetstream.PullHeartbeat(followHeartbeat), jetstream.PullExpiry(followExpiry))
		if err != nil {
			return nil, fmt.Errorf("logstore: follow %s: %w", f.spec.Stream, err)
		}
		f.it = it
	}
	for {
		jm, err := f.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil, fmt.Errorf("%w: %w", ErrFollowerClosed, err)
			}
			return nil, fmt.Errorf("logstore: follow %s: %w", f.spec.Stream, err)
		}
		m, err := f.s.followed(ctx, jm)
		if m != nil || err != nil {
			return m, err
		}
	}
}

// followed is the message jm delivered, its body opened; nil, nil for a
// sealed message whose key is gone: its session is erased and the
// message about to be purged, so a follower passes it as if it were. A
// sealed body that does not open (code unreadable) is delivered without
// its body, the reason in Unopened: what one message holds must not stop
// a follower of the whole stream at it.
func (s *Store) followed(ctx context.Context, jm jetstream.Msg) (*Msg, error) {
	md, err := jm.Metadata()
	if err != nil {
		return nil, fmt.Errorf("logstore: follow: %w", err)
	}
	m := &Msg{StreamSeq: md.Sequence.Stream, Subject: jm.Subject(), Header: jm.Headers(), Data: jm.Data(), Pending: md.NumPending, Stored: md.Timestamp}
	if err := s.open(ctx, m); err != nil {
		switch {
		case errors.Is(err, ErrKeyGone):
			return nil, nil
		case schema.CodeOf(err) == schema.CodeUnreadable:
			m.Data, m.Unopened = nil, err
			return m, nil
		}
		return nil, fmt.Errorf("logstore: follow: %w", err)
	}
	return m, nil
}

// Page is one pull of a Follower: at most PageEvents messages (and
// PageBytes), delivered as they arrive.
type Page struct {
	b   jetstream.MessageBatch
	s   *Store
	err error
}

// Fetch pulls the next page, waiting up to wait for its messages: the
// next pull is only made when the reader asks for it. (The ordered
// consumer is recreated on the server for each page, after the last
// message delivered: a reader slower than the inactive threshold loses
// nothing.)
func (f *Follower) Fetch(wait time.Duration) (*Page, error) {
	opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(wait)}
	if f.pageBytes > 0 {
		opts = append(opts, jetstream.FetchMaxBytes(f.pageBytes))
	}
	b, err := f.cons.Fetch(f.spec.PageEvents, opts...)
	if err != nil {
		return nil, fmt.Errorf("logstore: follow %s: %w", f.spec.Stream, err)
	}
	return &Page{b: b, s: f.s}, nil
}

// Messages yields the page's messages as they arrive.
func (p *Page) Messages() iter.Seq[*Msg] {
	return func(yield func(*Msg) bool) {
		for jm := range p.b.Messages() {
			m, err := p.s.followed(context.Background(), jm)
			if err != nil {
				p.err = err
				return
			}
			if m == nil {
				continue
			}
			if !yield(m) {
				return
			}
		}
	}
}

// Err is why the page ended early, if it did (after Messages).
func (p *Page) Err() error {
	if p.err != nil {
		return p.err
	}
	return p.b.Error()
}

// Close stops the follower and deletes its consumer on the server (in
// the background: the inactive threshold cleans up if that fails).
func (f *Follower) Close() {
	if f.it != nil {
		f.it.Stop()
	}
	ci := f.cons.CachedInfo()
	if ci == nil || ci.Name == "" {
		return
	}
	js, stream, name := f.s.js, f.spec.Stream, ci.Name
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(ctx, stream, name)
	}()
}

// StreamStatus is where a stream ends and when it was created (a stream
// created again starts its sequences over).
type StreamStatus struct {
	LastSeq uint64
	Created time.Time
	// Msgs is how many messages the stream holds.
	Msgs uint64
}

// StreamStatus reads a stream's status.
func (s *Store) StreamStatus(ctx context.Context, stream string) (StreamStatus, error) {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return StreamStatus{}, fmt.Errorf("logstore: stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return StreamStatus{}, fmt.Errorf("logstore: stream %s: %w", stream, err)
	}
	return StreamStatus{LastSeq: info.State.LastSeq, Created: info.Created.UTC(), Msgs: info.State.Msgs}, nil
}

// LastHeldSeq is the stream seq of the last message the stream still
// holds, read from its leader (0: it holds none). It is below the
// stream's LastSeq when its last messages were deleted (an erase):
// JetStream keeps a stream's last sequence after its message goes, so a
// reader waiting to consume LastSeq would wait for the next append.
func (s *Store) LastHeldSeq(ctx context.Context, stream string) (uint64, error) {
	var last uint64
	for _, subj := range s.layout.streamSubjects(stream) {
		m, err := s.msgGet(ctx, stream, msgGetRequest{LastFor: subj})
		if err != nil {
			return 0, fmt.Errorf("logstore: stream %s: last message held: %w", stream, err)
		}
		if m != nil {
			last = max(last, m.StreamSeq)
		}
	}
	return last, nil
}

// Connected reports whether the store's NATS connection is up.
func (s *Store) Connected() bool { return s.nc.IsConnected() }

// LiveMsg is one transient event (core NATS sessions.live.<id>): not
// stored; it names the durable seq it follows itself.
type LiveMsg struct {
	SessionID string
	// Caller is who published it, as the server says (the zero Caller:
	// from inside the services' account); api.Authorize decides whether
	// it may write to the session.
	Caller api.Caller
	Header nats.Header
	Data   []byte
}

// LiveSub is a subscription to transient events.
type LiveSub struct{ sub *nats.Subscription }

// Live calls fn for each transient event of a session, or of every
// session with sessionID "". fn runs on the subscription's goroutine, one
// event at a time, and should be quick: events that arrive while more
// than pendingBytes wait for it are dropped and counted in Dropped
// (pendingBytes <= 0: the client's default, 64 MiB).
//
// An agent of a tenant other than the default publishes the live events
// of its session stored as _T<tenant>_<id> on sessions.live.<id>, and the
// server names its account in the Nats-Request-Info header (DESIGN.md
// section 2): each event is given to fn under the stored id of the
// session its sender names, so that one tenant's events never reach the
// watchers of another's session of the same name.
func (s *Store) Live(sessionID string, pendingBytes int, fn func(LiveMsg)) (*LiveSub, error) {
	subject := LivePrefix + "*"
	if sessionID != "" {
		var err error
		if err = ValidateSessionID(sessionID); err != nil {
			return nil, err
		}
		_, wire := api.WireOf(sessionID)
		if subject, err = LiveSubject(wire); err != nil {
			return nil, err
		}
	}
	sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) {
		id, c, ok := liveSession(m)
		if !ok || (sessionID != "" && id != sessionID) {
			return
		}
		fn(LiveMsg{SessionID: id, Caller: c, Header: m.Header, Data: m.Data})
	})
	if err != nil {
		return nil, fmt.Errorf("logstore: live %s: %w", subject, err)
	}
	if pendingBytes > 0 {
		if err := sub.SetPendingLimits(-1, pendingBytes); err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("logstore: live %s: %w", subject, err)
		}
	}
	return &LiveSub{sub: sub}, nil
}

// Dropped is how many events the subscription dropped for a slow fn.
func (l *LiveSub) Dropped() int {
	n, _ := l.sub.Dropped()
	return n
}

// Close ends the subscription.
func (l *LiveSub) Close() error { return l.sub.Unsubscribe() }

// liveSession is the stored id of the session a live event is for (the
// subject's id, scoped by the sender's tenant) and its sender. An event
// whose sender the server names ambiguously, or that names an id its
// sender may not, is for no session.
func liveSession(m *nats.Msg) (string, api.Caller, bool) {
	c, err := api.CallerOf(m.Header.Values(api.RequestInfoHeader))
	if err != nil {
		return "", c, false
	}
	id, err := c.StoredID(strings.TrimPrefix(m.Subject, LivePrefix))
	return id, c, err == nil
}
