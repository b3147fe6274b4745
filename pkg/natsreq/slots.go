// Package natsreq sends NATS requests whose answers reach the waiting
// caller in one goroutine hand-off.
package natsreq

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Slots is a pool of reply inboxes, each a subscription delivering
// straight into a channel of its own. nats.go's RequestMsg routes every
// answer through one wildcard subscription whose handler runs on a
// goroutine of its own and then hands the message to the waiting caller:
// two goroutine hand-offs per request, which on a busy machine are two
// waits in the scheduler's run queue on every one-event append. A slot's
// answer goes from the connection's reader to the caller in one.
type Slots struct {
	nc     *nats.Conn
	prefix string // a response inbox of nc's, and "."
	free   chan *replySlot
	mu     sync.Mutex
	made   int
	max    int
}

// replySlot is one inbox: <prefix><n>.<gen>, subscribed as <prefix><n>.*.
// Each request uses a new gen, so a late answer to an earlier request
// (one that timed out) is recognized and dropped.
type replySlot struct {
	base  string
	ch    chan *nats.Msg
	gen   uint64
	timer *time.Timer
	// fireAt is when timer fires (on the clock of since), 0 once its
	// firing was received. The timer stays armed between requests: a
	// request whose deadline is no earlier than fireAt leaves it as it is,
	// and a firing before the deadline re-arms it, so most requests touch
	// no timer at all (a Reset and a Stop each were a visible share of a
	// one-event append).
	fireAt time.Duration
}

// epoch is the origin of since: a monotonic clock read once per call.
var epoch = time.Now()

func since() time.Duration { return time.Since(epoch) }

// DefaultMax is a bound on the inboxes of one pool that concurrent
// callers of a process rarely reach.
const DefaultMax = 1024

// New makes a pool of at most max inboxes (subscriptions) on nc, made as
// they are first needed; requests beyond them use RequestMsg.
func New(nc *nats.Conn, max int) *Slots {
	if max <= 0 {
		max = DefaultMax
	}
	return &Slots{nc: nc, prefix: nc.NewRespInbox() + ".", free: make(chan *replySlot, max), max: max}
}

// get takes a free slot, makes one if fewer than max exist, or returns
// nil (the caller uses RequestMsg).
func (p *Slots) get() *replySlot {
	select {
	case sl := <-p.free:
		return sl
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.made >= p.max {
		return nil
	}
	sl := &replySlot{base: p.prefix + strconv.Itoa(p.made) + ".", ch: make(chan *nats.Msg, 4)}
	if _, err := p.nc.ChanSubscribe(sl.base+"*", sl.ch); err != nil {
		return nil
	}
	p.made++
	return sl
}

// put returns sl to the free list (never full: at most max slots exist).
func (p *Slots) put(sl *replySlot) { p.free <- sl }

// Request publishes m (subject, headers, data) with a slot's next inbox
// as its reply subject and waits for the answer, for at most timeout
// (none if timeout <= 0) and while ctx lasts. It fails as
// nats.Conn.RequestMsg does: ErrNoResponders, ErrTimeout, the context's
// error, or the publish's.
func (p *Slots) Request(ctx context.Context, m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	sl := p.get()
	if sl == nil {
		rctx := ctx
		if timeout > 0 {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		resp, err := p.nc.RequestMsgWithContext(rctx, m)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = nats.ErrTimeout // this request's timeout, not the caller's
		}
		return resp, err
	}
	resp, err := sl.request(ctx, p.nc, m, timeout)
	if err != nil {
		// A late answer may still arrive: the next request drops it by
		// its gen, so the slot can be reused.
		for len(sl.ch) > 0 {
			<-sl.ch
		}
	}
	p.put(sl)
	return resp, err
}

func (sl *replySlot) request(ctx context.Context, nc *nats.Conn, m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	sl.gen++
	reply := sl.base + strconv.FormatUint(sl.gen, 10)
	out := nats.Msg{Subject: m.Subject, Reply: reply, Header: m.Header, Data: m.Data}
	if err := nc.PublishMsg(&out); err != nil {
		return nil, err
	}
	var expired <-chan time.Time
	var deadline time.Duration
	if timeout > 0 {
		deadline = since() + timeout
		sl.arm(deadline)
		expired = sl.timer.C
	}
	for {
		select {
		case resp := <-sl.ch:
			if resp.Subject != reply {
				continue // the late answer to an earlier request
			}
			if len(resp.Data) == 0 && resp.Header.Get("Status") == "503" {
				return nil, nats.ErrNoResponders
			}
			return resp, nil
		case <-expired:
			sl.fireAt = 0
			if since() >= deadline {
				return nil, nats.ErrTimeout
			}
			sl.arm(deadline) // armed by an earlier request
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// arm makes the slot's timer fire no later than deadline.
func (sl *replySlot) arm(deadline time.Duration) {
	if sl.fireAt != 0 && sl.fireAt <= deadline {
		return
	}
	d := max(deadline-since(), 1)
	if sl.timer == nil {
		sl.timer = time.NewTimer(d)
	} else {
		sl.timer.Reset(d)
	}
	sl.fireAt = deadline
}
