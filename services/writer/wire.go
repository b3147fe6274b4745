package writer

import (
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The wire types of the writer's endpoints (defined in pkg/api).
type (
	AppendRequest    = api.AppendRequest
	AppendReply      = api.AppendReply
	HeartbeatRequest = api.HeartbeatRequest
	HeartbeatReply   = api.HeartbeatReply
	ReadRequest      = api.ReadRequest
	ReadReply        = api.ReadReply
)

// ErrorBody is the error reply: {"error":{...}}.
type ErrorBody = wire.ErrorBody

// ErrorDetail carries a contract code (DESIGN.md section 4).
type ErrorDetail = wire.ErrorDetail

// encodeOK renders the success reply without reflection: it is sent once
// per append, in one allocation (okSize holds the longest reply).
func encodeOK(r AppendReply) []byte {
	b := make([]byte, 0, okSize+len(r.SessionID)+len(r.Hash))
	b = append(b, `{"sessionId":`...)
	b = strconv.AppendQuote(b, r.SessionID) // session ids are [A-Za-z0-9_-]
	b = append(b, `,"firstSeq":`...)
	b = strconv.AppendUint(b, r.FirstSeq, 10)
	b = append(b, `,"lastSeq":`...)
	b = strconv.AppendUint(b, r.LastSeq, 10)
	b = append(b, `,"streamSeq":`...)
	b = strconv.AppendUint(b, r.StreamSeq, 10)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, r.Duplicate)
	if r.Hash != "" {
		b = append(b, `,"hash":"`...)
		b = append(b, r.Hash...) // hex
		b = append(b, '"')
	}
	return append(b, '}')
}

// okSize is the length of encodeOK's reply but for the session id (its
// quotes counted) and the hash: the keys, three uint64s of 20 digits and
// "false".
const okSize = len(`{"sessionId":"","firstSeq":,"lastSeq":,"streamSeq":,"duplicate":false,"hash":""}`) + 3*20

// errorDetail maps an error to the wire.
func errorDetail(err error) ErrorDetail {
	var se *schema.Error
	if !asSchemaError(err, &se) {
		return ErrorDetail{Code: schema.CodeInternal, Message: err.Error()}
	}
	return wire.FromSchemaError(se)
}

// errorMsg builds the reply message: the JSON body and the micro error
// headers (Nats-Service-Error-Code carries the contract code).
func errorMsg(reply string, d ErrorDetail) *nats.Msg { return wire.ErrorMsg(reply, d) }

// askedError names the caller's tenant's sessions in a contract error's
// message as the caller names them (api.TenantWireText: the session it
// asked for by the id it asked with), never by the stored ids of its
// tenant: an agent never named those.
func askedError(err error, caller api.Caller) error {
	if err == nil || !caller.Scoped() {
		return err
	}
	var se *schema.Error
	if !asSchemaError(err, &se) {
		// What errorDetail answers for it.
		se = &schema.Error{Code: schema.CodeInternal, Message: err.Error()}
	}
	c := *se
	c.Message = api.TenantWireText(caller.Tenant, c.Message)
	return &c
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
