package client

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/api"
)

type callerKey struct{}

// AsCaller returns a context whose requests through a Client carry caller
// in api.RequestInfoHeader, as nats-server writes it on a request that
// crossed a tenant's import (ADR 010). It is for a service of the
// services' account relaying an agent's request to another service there,
// where no import rewrites the header: the service asked judges the
// request as that agent's (its tenant's ids, its sessions, its tenant's
// limits), not as an operator's. An agent gains nothing by it: the server
// replaces the header on the import. The zero Caller (an operator) adds
// none.
func AsCaller(ctx context.Context, caller api.Caller) context.Context {
	if caller.Operator() {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, caller)
}

// requestHeader is the header of a request sent under ctx: the caller
// AsCaller set, or none.
func requestHeader(ctx context.Context) nats.Header {
	c, ok := ctx.Value(callerKey{}).(api.Caller)
	if !ok {
		return nil
	}
	b, _ := json.Marshal(struct {
		Acc  string `json:"acc"`
		User string `json:"user"`
	}{c.Tenant, c.Agent})
	return nats.Header{api.RequestInfoHeader: []string{string(b)}}
}
