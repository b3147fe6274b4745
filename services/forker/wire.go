package forker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
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

// Call sends a fork request and waits for the reply (ctx bounds the wait:
// a long prefix takes seconds). A refusal is returned as a *schema.Error
// with the contract code and, for unsafe_cut, the nearest safe seqs.
func Call(ctx context.Context, nc *nats.Conn, req Request) (Reply, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	msg, err := nc.RequestWithContext(ctx, logstore.SubjectFork, b)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return Reply{}, fmt.Errorf("no forker is running on %s: %w", logstore.SubjectFork, err)
		}
		return Reply{}, fmt.Errorf("fork request: %w", err)
	}
	return DecodeReply(msg)
}

// DecodeReply reads a reply message of sessions.api.fork.
func DecodeReply(msg *nats.Msg) (Reply, error) {
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		var eb ErrorBody
		if err := json.Unmarshal(msg.Data, &eb); err != nil || eb.Error.Code == "" {
			return Reply{}, &schema.Error{Code: schema.Code(code), Message: msg.Header.Get(micro.ErrorHeader), Index: -1}
		}
		d := eb.Error
		return Reply{}, &schema.Error{Code: d.Code, Message: d.Message, Index: -1, CurrentSeq: d.CurrentSeq,
			NearestSafeBefore: d.NearestSafeBefore, NearestSafeAfter: d.NearestSafeAfter}
	}
	var r Reply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return Reply{}, fmt.Errorf("fork reply: %w", err)
	}
	return r, nil
}
