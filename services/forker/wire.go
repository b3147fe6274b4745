package forker

import (
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// The wire types of sessions.api.fork (defined in pkg/api).
type (
	Request = api.ForkRequest
	At      = api.ForkAt
	Reply   = api.ForkReply
)

// ErrorBody is the error reply, in the append error shape.
type ErrorBody = wire.ErrorBody

// ErrorDetail carries a contract code; unsafe_cut adds the nearest safe seqs.
type ErrorDetail = wire.ErrorDetail

// errorMsg builds the error reply: the JSON body and the micro error
// headers (the contract code as Nats-Service-Error-Code).
func errorMsg(reply string, err error) *nats.Msg { return wire.ErrorMsg(reply, wire.Detail(err)) }
