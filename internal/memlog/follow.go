package memlog

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// maxPayload is the largest message nats-server takes by default (its
// max_payload, the embedded servers' too): a follower's page in bytes is
// raised to it, as logstore raises it to its server's.
const maxPayload = 1 << 20

// Follower reads a stream in order, as logstore's Follower does with
// Next (or a page at a time, Fetch): the messages stored after a stream
// seq (of one subject, if the spec names one), waiting for the next one
// to be stored. It takes them
// from the stream a page at a time (spec.PageEvents, spec.PageBytes), as
// logstore's pulls them from the server: the messages of a page are
// delivered as they were when it was taken (one deleted since included),
// each with its Pending as the stream counted it then. It is not safe
// for concurrent use, but Close may be called from any goroutine.
type Follower struct {
	l         *Log
	spec      logstore.FollowSpec
	pageBytes int
	// after is the stream seq of the last message taken into a page;
	// page holds those taken and not yet delivered.
	after  uint64
	page   []*logstore.Msg
	closed chan struct{}
	close  sync.Once
}

// Follow starts a follower of spec.Stream after spec.StartAfter (OnlyNew:
// after the stream's last sequence now), with logstore's defaults for
// PageEvents and InactiveThreshold. While the log is unavailable
// (SetUnavailable) Follow is answered as JetStream answers it then
// (logstore.Unreachable); with OnUnavailable it waits for the log to be
// available again as logstore's Follow does (logstore.StartFollow),
// calling it before each wait. The inactive threshold means nothing in
// memory: no consumer is kept for the follower that could lapse (a
// JetStream ordered consumer that lapses is made again from where it
// was, which is what a follower in memory is all along).
func (l *Log) Follow(ctx context.Context, spec logstore.FollowSpec) (*Follower, error) {
	if spec.PageEvents <= 0 {
		spec.PageEvents = logstore.DefaultFollowPageEvents
	}
	if spec.InactiveThreshold <= 0 {
		spec.InactiveThreshold = logstore.DefaultFollowInactive
	}
	return logstore.StartFollow(ctx, "memlog", spec, func(context.Context) (*Follower, error) { return l.follow(spec) })
}

// follow makes the follower of spec, or says why the log will not.
func (l *Log) follow(spec logstore.FollowSpec) (*Follower, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unavailable {
		return nil, nats.ErrNoResponders
	}
	if !slices.Contains(l.Streams(), spec.Stream) {
		return nil, fmt.Errorf("no such stream")
	}
	f := &Follower{l: l, spec: spec, after: spec.StartAfter, closed: make(chan struct{})}
	if spec.PageBytes > 0 {
		f.pageBytes = max(spec.PageBytes, maxPayload+4<<10)
	}
	if spec.OnlyNew {
		f.after = uint64(len(l.stream(spec.Stream).msgs))
	}
	return f, nil
}

// SetUnavailable makes the log unavailable to new followers (on), as
// JetStream is while a stream has no leader (an election, a restarting
// node): Follow is answered with no responders; or available again (off).
func (l *Log) SetUnavailable(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unavailable = on
}

// Next returns the next message, waiting for it to be stored; its Pending
// is how many messages the follower had yet to deliver after it when its
// page was taken, as a JetStream consumer counts them. After Close:
// logstore.ErrFollowerClosed.
func (f *Follower) Next(ctx context.Context) (*logstore.Msg, error) {
	for {
		select {
		case <-f.closed:
			return nil, logstore.ErrFollowerClosed
		default:
		}
		if len(f.page) > 0 {
			m := f.page[0]
			f.page[0], f.page = nil, f.page[1:]
			return m, nil
		}
		stored := f.pull()
		if len(f.page) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.closed:
			return nil, logstore.ErrFollowerClosed
		case <-stored:
		}
	}
}

// pull takes the next page: the messages after the last one taken, up to
// PageEvents of them and, with PageBytes, as many as fit in the page's
// bytes (one at least), each with its Pending now. It returns what is
// closed when more messages are stored.
func (f *Follower) pull() <-chan struct{} {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(f.spec.Stream)
	var left uint64
	msgs := s.msgs[min(f.after, uint64(len(s.msgs))):]
	for _, m := range msgs {
		if f.takes(m) {
			left++
		}
	}
	bytes := 0
	for _, m := range msgs {
		if !f.takes(m) {
			continue
		}
		n := msgBytes(m)
		if len(f.page) == f.spec.PageEvents || f.pageBytes > 0 && len(f.page) > 0 && bytes+n > f.pageBytes {
			break
		}
		left--
		c := *m
		c.Pending = left
		f.page = append(f.page, &c)
		f.after, bytes = m.StreamSeq, bytes+n
	}
	return l.stored
}

// takes reports whether the follower delivers m: stored, of its subject.
func (f *Follower) takes(m *logstore.Msg) bool {
	return m != nil && (f.spec.Subject == "" || m.Subject == f.spec.Subject)
}

// msgBytes is the size of m as a page counts it: its subject, headers
// and body.
func msgBytes(m *logstore.Msg) int {
	n := len(m.Subject) + len(m.Data)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // "k: v\r\n"
		}
	}
	return n
}

// Close stops the follower: Next returns logstore.ErrFollowerClosed.
func (f *Follower) Close() { f.close.Do(func() { close(f.closed) }) }

// wake tells the followers waiting for a message that messages were
// stored. The caller holds mu.
func (l *Log) wake() {
	close(l.stored)
	l.stored = make(chan struct{})
}

// Page is one pull of a Follower (Fetch): the messages it took, as
// logstore's Page is one pull of its consumer.
type Page struct{ msgs []*logstore.Msg }

// Messages yields the page's messages in stream order.
func (p *Page) Messages() iter.Seq[*logstore.Msg] { return slices.Values(p.msgs) }

// Err is nil: a page in memory does not end early.
func (p *Page) Err() error { return nil }

// Fetch takes the next page (what Next would deliver next, a page's
// worth), waiting up to wait for a message to be stored when none is
// there: an empty page then, as logstore's Fetch gives when its wait ends
// with no message. After Close: logstore.ErrFollowerClosed.
func (f *Follower) Fetch(wait time.Duration) (*Page, error) {
	select {
	case <-f.closed:
		return nil, logstore.ErrFollowerClosed
	default:
	}
	if len(f.page) == 0 {
		stored := f.pull()
		if len(f.page) == 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-stored:
				f.pull()
			case <-t.C:
			case <-f.closed:
				return nil, logstore.ErrFollowerClosed
			}
		}
	}
	p := &Page{msgs: f.page}
	f.page = nil
	return p, nil
}
