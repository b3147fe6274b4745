package memlog

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Follower reads a stream in order, as logstore's Follower does with
// Next: the messages stored after a stream seq (of one subject, if the
// spec names one), waiting for the next one to be stored. It is not safe
// for concurrent use, but Close may be called from any goroutine.
type Follower struct {
	l    *Log
	spec logstore.FollowSpec
	// after is the stream seq of the last message delivered.
	after  uint64
	closed chan struct{}
	close  sync.Once
}

// Follow starts a follower of spec.Stream after spec.StartAfter (OnlyNew:
// after the stream's last sequence now). memlog pulls no pages: PageEvents,
// PageBytes, InactiveThreshold and OnUnavailable mean nothing to it.
func (l *Log) Follow(_ context.Context, spec logstore.FollowSpec) (*Follower, error) {
	if !slices.Contains(l.Streams(), spec.Stream) {
		return nil, fmt.Errorf("memlog: follow %s: no such stream", spec.Stream)
	}
	f := &Follower{l: l, spec: spec, after: spec.StartAfter, closed: make(chan struct{})}
	if spec.OnlyNew {
		l.mu.Lock()
		f.after = uint64(len(l.stream(spec.Stream).msgs))
		l.mu.Unlock()
	}
	return f, nil
}

// Next returns the next message, waiting for it to be stored; its Pending
// is how many messages the follower has yet to deliver after it, as a
// JetStream consumer counts them. After Close: logstore.ErrFollowerClosed.
func (f *Follower) Next(ctx context.Context) (*logstore.Msg, error) {
	for {
		select {
		case <-f.closed:
			return nil, logstore.ErrFollowerClosed
		default:
		}
		l := f.l
		l.mu.Lock()
		s := l.stream(f.spec.Stream)
		var next *logstore.Msg
		var pending uint64
		for _, m := range s.msgs[min(f.after, uint64(len(s.msgs))):] {
			switch {
			case m == nil || f.spec.Subject != "" && m.Subject != f.spec.Subject:
			case next == nil:
				next = m
			default:
				pending++
			}
		}
		stored := l.stored
		l.mu.Unlock()
		if next != nil {
			f.after = next.StreamSeq
			c := *next
			c.Pending = pending
			return &c, nil
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

// Close stops the follower: Next returns logstore.ErrFollowerClosed.
func (f *Follower) Close() { f.close.Do(func() { close(f.closed) }) }

// wake tells the followers waiting for a message that messages were
// stored. The caller holds mu.
func (l *Log) wake() {
	close(l.stored)
	l.stored = make(chan struct{})
}
