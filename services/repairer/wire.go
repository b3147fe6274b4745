package repairer

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The wire types of sessions.api.repair (defined in pkg/api).
type (
	RepairRequest = api.RepairRequest
	RepairReply   = api.RepairReply
)

// ErrorBody is the error reply: {"error":{...}}, the append error shape.
type ErrorBody = wire.ErrorBody

// ErrorDetail carries a contract code.
type ErrorDetail = wire.ErrorDetail

const demandTimeout = 30 * time.Second

// dispatch serves a request on its own goroutine (micro calls an
// endpoint's handler one request at a time) and replies by publishing
// directly: micro.Request's bookkeeping is not safe from another goroutine.
func (s *Service) dispatch(ctx context.Context, r micro.Request, timeout time.Duration, handle func(context.Context, *nats.Msg)) {
	m := &nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Data: r.Data()}
	s.demand <- struct{}{}
	s.wg.Add(1)
	go func() {
		defer func() {
			<-s.demand
			s.wg.Done()
		}()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		handle(ctx, m)
	}()
}

func (s *Service) handleRepair(ctx context.Context, m *nats.Msg) {
	var req RepairRequest
	if err := schema.Unmarshal(m.Data, &req); err != nil {
		s.respondErr(m.Reply, ErrorDetail{Code: schema.CodeBadRequest, Message: "request: " + err.Error()})
		return
	}
	if req.SessionID == "" {
		s.respondErr(m.Reply, ErrorDetail{Code: schema.CodeBadRequest, Message: "sessionId is required"})
		return
	}
	out, err := s.Repair(ctx, req.SessionID, req.Force)
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	body, _ := json.Marshal(RepairReply{SessionID: req.SessionID, Repaired: out.Repaired, FirstSeq: out.FirstSeq, LastSeq: out.LastSeq, Closed: out.Closed})
	if wire.Answerable(m.Reply) {
		if err := s.nc.Publish(m.Reply, body); err != nil {
			s.log.Warn("repairer: reply", "err", err)
		}
	}
}

// errorDetail maps an error to the wire.
func errorDetail(err error) ErrorDetail { return wire.Detail(err) }

func (s *Service) respondErr(reply string, d ErrorDetail) {
	if !wire.Answerable(reply) {
		return
	}
	msg := wire.ErrorMsg(reply, d)
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("repairer: reply", "err", err)
	}
}
