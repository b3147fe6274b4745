// Package wire renders contract errors for the NATS services: the JSON
// error body of DESIGN.md section 4 ({"error":{...}}) and the micro error
// headers, in one place for the writer, the repairer and the forker, and
// the step before each of them reports ready (Subscribed).
package wire

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ErrorBody is an error reply (defined in pkg/api).
type ErrorBody = api.ErrorBody

// ErrorDetail carries a contract code (defined in pkg/api).
type ErrorDetail = api.ErrorDetail

// Detail maps any error to the wire; an error without a contract code is
// internal.
func Detail(err error) ErrorDetail {
	var se *schema.Error
	if !errors.As(err, &se) {
		return ErrorDetail{Code: schema.CodeInternal, Message: err.Error()}
	}
	return FromSchemaError(se)
}

// FromSchemaError maps a contract error to the wire.
func FromSchemaError(se *schema.Error) ErrorDetail {
	d := ErrorDetail{Code: se.Code, Message: se.Message, CurrentSeq: se.CurrentSeq,
		NearestSafeBefore: se.NearestSafeBefore, NearestSafeAfter: se.NearestSafeAfter}
	if d.Message == "" {
		d.Message = string(se.Code)
	}
	if se.Index >= 0 {
		i := se.Index
		d.Index = &i
	}
	return d
}

// maxHeaderDesc bounds the description copied into a header.
const maxHeaderDesc = 512

// ErrorMsg builds the reply message: the JSON body, and the micro error
// headers with the contract code as Nats-Service-Error-Code.
func ErrorMsg(reply string, d ErrorDetail) *nats.Msg {
	body, _ := json.Marshal(ErrorBody{Error: d})
	m := nats.NewMsg(reply)
	m.Data = body
	m.Header.Set(micro.ErrorCodeHeader, string(d.Code))
	// A header value cannot hold a line break.
	desc := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, d.Message)
	if len(desc) > maxHeaderDesc {
		desc = desc[:maxHeaderDesc]
	}
	m.Header.Set(micro.ErrorHeader, desc)
	return m
}

// Answerable reports whether a service may publish its answer to reply.
// nats-server does not check a request's reply subject against the
// requester's permissions, and a service answers with its own: an agent
// naming sessions.ev.<id>, a $KV or $JS subject or a service's inbox as the
// reply would have the service write there (docs/adr/004). Answers go to
// inboxes only: any subject but the sessionlog ones (log, API, live) and
// $-subjects (JetStream, KV, micro, system).
func Answerable(reply string) bool {
	return reply != "" && !strings.HasPrefix(reply, "sessions.") && !strings.HasPrefix(reply, "$")
}

// Subscribed waits until the server holds nc's subscriptions (it answers a
// flush once it has processed every SUB sent before), so a service that
// reports ready after it can be reached from any other connection: before,
// a request may find no responders. Disconnected, the client sends the
// subscriptions again on reconnect, so a failed flush is only logged.
func Subscribed(nc *nats.Conn, log *slog.Logger) {
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		log.Warn("flush of subscriptions", "err", err)
	}
}
