package logstore

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// replySlots is a pool of reply inboxes, each a subscription delivering
// straight into a channel of its own. nats.go's RequestMsg routes every
// answer through one wildcard subscription whose handler runs on a
// goroutine of its own and then hands the message to the waiting caller:
// two goroutine hand-offs per request, which on a busy machine are two
// waits in the scheduler's run queue on every one-event append. A slot's
// answer goes from the connection's reader to the caller in one.
type replySlots struct {
	nc     *nats.Conn
	prefix string // _INBOX.<nuid>.
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
	sub   *nats.Subscription
	ch    chan *nats.Msg
	gen   uint64
	timer *time.Timer
}

// maxWait stands for "no timeout of the slot's own".
const maxWait = time.Duration(1<<63 - 1)

// replySlotsMax bounds the inboxes (subscriptions) of one store; requests
// beyond it use RequestMsg.
const replySlotsMax = 1024

func newReplySlots(nc *nats.Conn, max int) *replySlots {
	return &replySlots{nc: nc, prefix: nc.NewRespInbox() + ".", free: make(chan *replySlot, max), max: max}
}

// get takes a free slot, makes one if fewer than max exist, or returns
// nil (the caller uses RequestMsg).
func (p *replySlots) get() *replySlot {
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
	sub, err := p.nc.ChanSubscribe(sl.base+"*", sl.ch)
	if err != nil {
		return nil
	}
	sl.sub = sub
	p.made++
	return sl
}

func (p *replySlots) put(sl *replySlot) {
	select {
	case p.free <- sl:
	default: // cannot happen: at most max slots exist
		_ = sl.sub.Unsubscribe()
	}
}

// request publishes m with the slot's next inbox as its reply subject and
// waits for the answer, as nats.Conn.RequestMsg does (ErrNoResponders,
// ErrTimeout, the context's error).
func (p *replySlots) request(ctx context.Context, m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	sl := p.get()
	if sl == nil {
		if _, ok := ctx.Deadline(); ok {
			return p.nc.RequestMsgWithContext(ctx, m)
		}
		return p.nc.RequestMsg(m, timeout)
	}
	resp, err := sl.request(p.nc, ctx, m, timeout)
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

func (sl *replySlot) request(nc *nats.Conn, ctx context.Context, m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	sl.gen++
	reply := sl.base + strconv.FormatUint(sl.gen, 10)
	out := nats.Msg{Subject: m.Subject, Reply: reply, Header: m.Header, Data: m.Data}
	if err := nc.PublishMsg(&out); err != nil {
		return nil, err
	}
	// A deadline in ctx bounds the wait by itself, as with
	// RequestMsgWithContext; otherwise the slot's timer does.
	if _, ok := ctx.Deadline(); ok {
		timeout = maxWait
	}
	if sl.timer == nil {
		sl.timer = time.NewTimer(timeout)
	} else {
		sl.timer.Reset(timeout)
	}
	defer sl.timer.Stop()
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
		case <-sl.timer.C:
			return nil, nats.ErrTimeout
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
