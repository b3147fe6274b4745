package projector

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The projector's NATS endpoint: sessions.api.list (DESIGN.md section
// 12), the sessions a requester may read, from the views. Every replica
// answers in one queue group.
const (
	ListServiceName = "sessionlog-projector"
	listQueueGroup  = "sessionlog-projector"
	// listConcurrent bounds the list requests handled at once.
	listConcurrent = 64
	// listTimeout bounds one list request.
	listTimeout = 30 * time.Second
)

// serveList serves sessions.api.list on Config.Conn until stop is
// called, which waits for the requests in flight.
func (s *Service) serveList(ctx context.Context) (stop func(), err error) {
	nc := s.cfg.Conn
	reqs := wire.NewRequests(listConcurrent)
	svc, err := wire.Serve(context.WithoutCancel(ctx), nc, micro.Config{
		Name:        ListServiceName,
		Version:     "1.0.0",
		Description: "sessionlog projector: the sessions a requester may read",
		QueueGroup:  listQueueGroup,
	}, reqs, wire.Endpoint{Name: "list", Subject: api.SubjectList, Timeout: listTimeout, Handle: func(_ context.Context, m *nats.Msg) {
		rep, err := s.listAs(m)
		wire.Reply(nc, s.log, m.Reply, rep, err)
	}})
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	return func() {
		if err := svc.Stop(); err != nil {
			s.log.Warn("projector: stop the list endpoint", "err", err)
		}
		reqs.Wait()
	}, nil
}

// listAs answers one list request as the server named its sender.
func (s *Service) listAs(m *nats.Msg) (api.ListReply, error) {
	caller, err := api.CallerOf(m.Header.Values(api.RequestInfoHeader))
	if err != nil {
		return api.ListReply{}, err
	}
	var req api.ListRequest
	if len(m.Data) > 0 {
		if err := schema.Unmarshal(m.Data, &req); err != nil {
			return api.ListReply{}, schema.Errorf(schema.CodeBadRequest, "request is not a valid list request: %v", err)
		}
	}
	// A projector catching up would list only part of what the
	// requester may read: it says so instead.
	if err := s.Ready(); err != nil {
		return api.ListReply{}, schema.Errorf(schema.CodeInternal, "%v: ask again", err)
	}
	return s.http.ListAs(caller, req)
}
