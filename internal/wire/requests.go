package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Requests runs the requests a service takes each on its own goroutine
// (micro calls an endpoint's handler one request at a time), a bounded
// number at once. The handler answers by publishing directly:
// micro.Request's bookkeeping is not safe from another goroutine.
type Requests struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

// NewRequests serves at most n requests at once; the next waits for one
// to end.
func NewRequests(n int) *Requests { return &Requests{slots: make(chan struct{}, n)} }

// Go runs h on r's message with ctx, bounded by timeout when it is > 0.
func (q *Requests) Go(ctx context.Context, r micro.Request, timeout time.Duration, h func(context.Context, *nats.Msg)) {
	m := &nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Data: r.Data(), Header: nats.Header(r.Headers())}
	q.slots <- struct{}{}
	q.wg.Add(1)
	go func() {
		defer func() {
			<-q.slots
			q.wg.Done()
		}()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		h(ctx, m)
	}()
}

// Wait waits for the requests being handled.
func (q *Requests) Wait() { q.wg.Wait() }

// Reply answers a request on nc: the JSON of v, or err with its contract
// code (Detail). A reply subject a service may not answer (Answerable)
// gets nothing; a failed publish is logged.
func Reply(nc *nats.Conn, log *slog.Logger, reply string, v any, err error) {
	if !Answerable(reply) {
		return
	}
	m := &nats.Msg{Subject: reply}
	if err == nil {
		m.Data, err = json.Marshal(v)
	}
	if err != nil {
		m = ErrorMsg(reply, Detail(err))
	}
	if err := nc.PublishMsg(m); err != nil {
		log.Warn("reply", "err", err)
	}
}

// Endpoint is one endpoint of a service: the handler of the requests on
// its subject, each bounded by Timeout when it is > 0.
type Endpoint struct {
	Name, Subject string
	Timeout       time.Duration
	Handle        func(context.Context, *nats.Msg)
}

// Serve adds the micro service cfg on nc with its endpoints, each request
// handled through q with ctx (requests in flight finish with it, not with
// the service's Run). The caller stops the service (Stop) and then waits
// for q.
func Serve(ctx context.Context, nc *nats.Conn, cfg micro.Config, q *Requests, eps ...Endpoint) (micro.Service, error) {
	svc, err := micro.AddService(nc, cfg)
	if err != nil {
		return nil, fmt.Errorf("add service: %w", err)
	}
	for _, ep := range eps {
		h := ep
		if err := svc.AddEndpoint(ep.Name, micro.HandlerFunc(func(r micro.Request) { q.Go(ctx, r, h.Timeout, h.Handle) }),
			micro.WithEndpointSubject(ep.Subject)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("endpoint %s: %w", ep.Name, err)
		}
	}
	return svc, nil
}

// Ready is a service's readiness: started (serving), and its connection
// up.
func Ready(name string, started bool, nc *nats.Conn) error {
	if !started {
		return errors.New(name + ": not started")
	}
	if !nc.IsConnected() {
		return fmt.Errorf("%s: nats %s", name, nc.Status())
	}
	return nil
}
