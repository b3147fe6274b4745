package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/oklog/ulid/v2"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/natsreq"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Defaults.
const (
	// DefaultTimeout is how long one request waits for the writer. It is
	// above the writer's own resolution of a lost acknowledgement in the
	// common case; a timeout is an unknown outcome and is retried.
	DefaultTimeout = 10 * time.Second
	// DefaultRetries is how often an unknown outcome is retried.
	DefaultRetries = 5
	DefaultBackoff = 50 * time.Millisecond
	MaxBackoff     = 2 * time.Second
)

// Client talks to the sessionlog services over NATS. It is safe for
// concurrent use.
type Client struct {
	nc *nats.Conn
	// replies carries the writer's answers (one goroutine hand-off each,
	// where nats.go's request mux takes two).
	replies *natsreq.Slots
	timeout time.Duration
	retries int
	backoff time.Duration
	now     func() time.Time
	// acks is what was acknowledged per session (rolledback.go).
	acks acks
	// refused holds the subjects the server refused this connection's
	// user to publish (publishRefused), each with its error.
	refused sync.Map
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets how long one request waits for its reply.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetries sets how often an unknown outcome is retried (0: never).
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// WithBackoff sets the first pause before a retry (it doubles, up to 2s).
func WithBackoff(d time.Duration) Option { return func(c *Client) { c.backoff = d } }

// WithClock sets the clock used for event times.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns a client using nc.
func New(nc *nats.Conn, opts ...Option) *Client {
	c := &Client{nc: nc, replies: natsreq.New(nc, 0), timeout: DefaultTimeout, retries: DefaultRetries, backoff: DefaultBackoff, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	if c.retries < 0 {
		c.retries = 0
	}
	return c
}

// Conn is the client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// AppendRequest is one append: the wire's request (pkg/api), so that a
// reader finds what an agent sends in one place. Events need only their
// type, ids and data; the writer fills seq, and the client fills eventId
// (a ULID) and time where they are empty. ExpectedSeq: nil = after the
// tail; pointer to 0 = the session must not exist; n = its last seq must
// be n (see Seq). Holder names the agent process; the writer renews its
// lease. Takeover takes the session's lease from another holder whose
// lease is live (a recovering agent that knows the other is gone);
// without it such an append is refused with ErrConflict naming the
// holder.
type AppendRequest = api.AppendRequest

// Seq returns a pointer to n, for AppendRequest.ExpectedSeq.
func Seq(n uint64) *uint64 { return &n }

// AppendResult is a committed append.
type AppendResult struct {
	SessionID         string
	FirstSeq, LastSeq uint64
	StreamSeq         uint64
	// Duplicate: the events were already stored (a retry of a committed
	// request, possibly this call's own earlier attempt).
	Duplicate bool
	// EventIDs are the ids the events were stored under.
	EventIDs []string
	// Attempts is how many requests this append took.
	Attempts int
}

// Append sends req and returns its outcome: committed, or an error with
// errors.Is(err, ErrNotCommitted) (nothing stored), errors.Is(err,
// ErrOutcomeUnknown) (maybe stored: send the same request again), or
// another *Error. Event ids are filled before the first send, so retries
// of unknown outcomes, done here automatically, carry the same ids.
func (c *Client) Append(ctx context.Context, req AppendRequest) (AppendResult, error) {
	p, err := c.PrepareAppend(req)
	if err != nil {
		return AppendResult{}, err
	}
	return c.SendAppend(ctx, p)
}

// PreparedAppend is an append encoded and not yet sent (PrepareAppend):
// its event ids and times are fixed, so every send of it is the same
// request.
type PreparedAppend struct {
	sessionID string
	ids       []string
	body      []byte
}

// PrepareAppend fills in and encodes req as Append would send it, so that
// a caller that bounds its appends in flight can encode the next one while
// the others are unanswered and send it the moment a slot frees. Only an
// event that cannot be encoded is an error (bad_request).
func (c *Client) PrepareAppend(req AppendRequest) (*PreparedAppend, error) {
	evs, ids := completeEvents(req, c.now().UTC())
	out := req
	out.Events = evs
	body, err := encodeAppend(out)
	if err != nil {
		return nil, errorf(schema.CodeBadRequest, "encode request: %v", err)
	}
	return &PreparedAppend{sessionID: req.SessionID, ids: ids, body: body}, nil
}

// SendAppend sends a prepared append, with Append's outcomes and retries;
// sending it again (after an unknown outcome) is a retry of the same
// request.
func (c *Client) SendAppend(ctx context.Context, p *PreparedAppend) (AppendResult, error) {
	var r appendReply
	prev, acked := c.acks.get(p.sessionID)
	n, err := c.request(ctx, api.SubjectAppend, p.body, &r, c.timeout)
	reply := r.AppendReply
	if err = c.checkAppend(p.sessionID, prev, acked, reply, err); err != nil {
		return AppendResult{Attempts: n}, err
	}
	return AppendResult{SessionID: reply.SessionID, FirstSeq: reply.FirstSeq, LastSeq: reply.LastSeq, StreamSeq: reply.StreamSeq,
		Duplicate: reply.Duplicate, EventIDs: p.ids, Attempts: n}, nil
}

// completeEvents copies req's events with what the writer would fill in
// filled in: an event id, the time now, the schema version, the session
// id, and with an expectation the seqs (the writer assigns them after the
// tail, which must then be the expected seq; a seq given is checked as
// an expectation). The events then go as schema.Encode writes them,
// which the writer stores as they came instead of encoding them again.
func completeEvents(req AppendRequest, now time.Time) ([]schema.Envelope, []string) {
	evs := make([]schema.Envelope, len(req.Events))
	copy(evs, req.Events)
	ids := make([]string, len(evs))
	seqs := req.ExpectedSeq != nil && *req.ExpectedSeq < math.MaxUint64-uint64(len(evs))
	for i := range evs {
		if evs[i].EventID == "" {
			evs[i].EventID = ulid.Make().String()
		}
		if evs[i].Time.IsZero() {
			evs[i].Time = now
		}
		ids[i] = evs[i].EventID
		seqs = seqs && evs[i].Seq == 0
	}
	for i := range evs {
		if evs[i].SchemaVersion == 0 {
			evs[i].SchemaVersion = schema.Version
		}
		if evs[i].SessionID == "" {
			evs[i].SessionID = req.SessionID
		}
		if seqs {
			evs[i].Seq = *req.ExpectedSeq + 1 + uint64(i)
		}
	}
	return evs, ids
}

// request sends body until it gets a definite answer, retrying unknown
// outcomes, each attempt waiting for at most timeout (none if timeout <=
// 0); it returns the number of requests sent. Once one attempt had
// an unknown outcome, a later "not committed" says nothing about that
// attempt: the result stays unknown unless a later answer is definite
// about the events (ok, duplicate, or a refusal of their content or
// position).
func (c *Client) request(ctx context.Context, subject string, body []byte, out any, timeout time.Duration) (int, error) {
	unknown := false
	var last error
	sent := 0
	for attempt := 0; ; attempt++ {
		sent++
		err := c.once(ctx, subject, body, out, timeout)
		switch {
		case err == nil:
			return attempt + 1, nil
		case errors.Is(err, ErrOutcomeUnknown):
			unknown = true
		case errors.Is(err, ErrNotCommitted):
			if !unknown {
				return attempt + 1, err
			}
		default:
			return attempt + 1, err
		}
		last = err
		if attempt >= c.retries || ctx.Err() != nil {
			break
		}
		d := c.backoff << attempt
		if d > MaxBackoff || d <= 0 {
			d = MaxBackoff
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	if unknown && !errors.Is(last, ErrOutcomeUnknown) {
		return sent, &Error{Code: schema.CodeOutcomeUnknown, Index: -1,
			Message: fmt.Sprintf("an earlier attempt may be stored; the last said: %v; send the same request again", last)}
	}
	return sent, last
}

// once sends one request and waits for its reply for at most timeout
// (none if timeout <= 0) and while ctx lasts. Errors are classified by
// what can have happened: no responders or a closed connection before
// sending = nothing was stored; a timeout or a connection lost while
// waiting = unknown.
func (c *Client) once(ctx context.Context, subject string, body []byte, out any, timeout time.Duration) error {
	if c.nc.IsClosed() {
		return errorf(schema.CodeNotCommitted, "nats connection closed: nothing was sent")
	}
	if err, ok := c.refused.Load(subject); ok {
		return err.(error)
	}
	m, err := c.replies.Request(ctx, &nats.Msg{Subject: subject, Data: body, Header: requestHeader(ctx)}, timeout)
	if err != nil {
		if perr := c.publishRefused(subject); perr != nil {
			return perr
		}
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return errorf(schema.CodeNotCommitted, "no %s is listening on %s: nothing was stored", server(subject), subject)
		case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrInvalidMsg):
			return errorf(schema.CodeBadRequest, "request refused before sending: %v", err)
		}
		return errorf(schema.CodeOutcomeUnknown, "no reply: %v", err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		var we api.ErrorBody
		if jerr := json.Unmarshal(m.Data, &we); jerr != nil || we.Error.Code == "" {
			we.Error.Code, we.Error.Message = schema.Code(code), m.Header.Get(micro.ErrorHeader)
		}
		e := &Error{Code: we.Error.Code, Message: we.Error.Message, Index: -1}
		if we.Error.CurrentSeq != nil {
			e.CurrentSeq, e.hasCurrent = *we.Error.CurrentSeq, true
		}
		if we.Error.Index != nil {
			e.Index = *we.Error.Index
		}
		e.NearestSafeBefore, e.NearestSafeAfter = we.Error.NearestSafeBefore, we.Error.NearestSafeAfter
		return e
	}
	if d, ok := out.(replyDecoder); ok {
		if err := d.decodeReply(m.Data); err != nil {
			return errorf(schema.CodeOutcomeUnknown, "unreadable reply %q: %v", schema.Clip(string(m.Data), 80), err)
		}
		return nil
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		// A garbled reply to an append: whether it committed is unknown.
		return errorf(schema.CodeOutcomeUnknown, "unreadable reply %q: %v", schema.Clip(string(m.Data), 80), err)
	}
	return nil
}

// publishRefused is the error of a request to subject that got no answer
// because the server refused the user to publish it (the connection's
// last error says so): definite, nothing was delivered, and kept for the
// subject, whose later requests fail at once. An agent of a tenant other
// than the default may not publish sessions.api.source.* (ADR 010).
func (c *Client) publishRefused(subject string) error {
	last := c.nc.LastError()
	if last == nil || !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), fmt.Sprintf("Publish to %q", subject)) {
		return nil
	}
	err := errorf(schema.CodeForbidden, "this NATS user may not publish %s (%v): nothing was delivered", subject, last)
	c.refused.Store(subject, err)
	return err
}

// HeartbeatResult is the writer's answer to a heartbeat.
type HeartbeatResult struct {
	SessionID string
	Holder    string
	// TTL is how long the lease lasts from now.
	TTL time.Duration
}

// Heartbeat renews holder's lease of an existing session. While another
// holder's lease is live it is refused with ErrConflict naming that holder.
func (c *Client) Heartbeat(ctx context.Context, sessionID, holder string) (HeartbeatResult, error) {
	return c.heartbeat(ctx, sessionID, holder, false)
}

// TakeOver takes the session's lease for holder even while another
// holder's lease is live ("takeover": true, DESIGN.md section 2): what a
// recovering agent does once it knows the former holder is gone.
func (c *Client) TakeOver(ctx context.Context, sessionID, holder string) (HeartbeatResult, error) {
	return c.heartbeat(ctx, sessionID, holder, true)
}

func (c *Client) heartbeat(ctx context.Context, sessionID, holder string, takeover bool) (HeartbeatResult, error) {
	body, _ := json.Marshal(api.HeartbeatRequest{SessionID: sessionID, Holder: holder, Takeover: takeover})
	var r api.HeartbeatReply
	// A heartbeat changes nothing but the lease: an unknown outcome is
	// retried like an append's.
	if _, err := c.request(ctx, api.SubjectHeartbeat, body, &r, c.timeout); err != nil {
		return HeartbeatResult{}, err
	}
	return HeartbeatResult{SessionID: r.SessionID, Holder: r.Holder, TTL: time.Duration(r.TTLMs) * time.Millisecond}, nil
}

// SourceAppend appends an agent's own transcript entries through the
// writer (sessions.api.source.append, DESIGN.md section 15); with no
// entries it records the transcript's key alone.
func (c *Client) SourceAppend(ctx context.Context, req api.SourceAppendRequest) (api.SourceAppendReply, error) {
	return call[api.SourceAppendReply](ctx, c, api.SubjectSourceAppend, req)
}

// call sends req as JSON on subject (Client.request: retried while its
// outcome is unknown) and decodes the reply as an R.
func call[R any](ctx context.Context, c *Client, subject string, req any) (R, error) {
	var r R
	body, err := json.Marshal(req)
	if err != nil {
		return r, errorf(schema.CodeBadRequest, "encode request: %v", err)
	}
	if _, err := c.request(ctx, subject, body, &r, c.timeout); err != nil {
		var zero R
		return zero, err
	}
	return r, nil
}

// Fork asks the forker for a child of req.ParentID (DESIGN.md section 8).
// Each attempt waits for the reply while ctx lasts, not for the client's
// request timeout: copying a long prefix takes seconds to minutes. An
// unknown outcome is retried as an append's is: the same request again
// answers the fork that committed, or finishes the one begun; an empty
// ChildID is filled (a ULID) before the first send, so that every attempt
// names the same child. A refusal is an *Error with the contract code
// and, for unsafe_cut, the nearest safe seqs.
func (c *Client) Fork(ctx context.Context, req api.ForkRequest) (api.ForkReply, error) {
	if req.ChildID == "" {
		req.ChildID = ulid.Make().String()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return api.ForkReply{}, errorf(schema.CodeBadRequest, "encode request: %v", err)
	}
	var r api.ForkReply
	if _, err := c.request(ctx, api.SubjectFork, body, &r, 0); err != nil {
		return api.ForkReply{}, err
	}
	return r, nil
}

// server names the service that answers subject, for an error that says
// none did.
func server(subject string) string {
	switch subject {
	case api.SubjectFork:
		return "forker"
	case api.SubjectList:
		return "projector"
	}
	return "writer"
}
