package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The dashboard's actions go through the sessions.api.* requests an SRE
// sends (sessionlog repair, fork, export): the projector only relays them
// on Config.Conn, so they obey the same services, rules and permissions.
// Each is a POST behind httpauth.Action (custom header, same origin, the
// token in the Authorization header).

// actionTimeout bounds one relayed request; a fork of a long prefix may
// take longer (its reply then says the outcome is unknown: look at the
// tree).
const actionTimeout = 60 * time.Second

// DashboardHolder is the holder name of the appends the dashboard makes.
const DashboardHolder = "dashboard"

// ActionError is an action's refusal: the contract's error detail, so a
// refused cut carries its nearest safe seqs.
type ActionError struct {
	Error api.ErrorDetail `json:"error"`
}

func (s *Server) actionRoutes(mux *http.ServeMux) {
	guard := func(h http.HandlerFunc) http.Handler { return httpauth.Action(s.cfg.HTTPToken, h) }
	mux.Handle("POST /v1/sessions/{id}/resume", guard(s.handleResume))
	mux.Handle("POST /v1/sessions/{id}/repair", guard(s.handleRepair))
	mux.Handle("POST /v1/sessions/{id}/fork", guard(s.handleFork))
	mux.Handle("POST /v1/sessions/{id}/erase", guard(s.handleErase))
}

func actionFailed(w http.ResponseWriter, d api.ErrorDetail) {
	status := http.StatusConflict
	switch d.Code {
	case schema.CodeBadRequest, schema.CodeUnsafeCut:
		status = http.StatusBadRequest
	case schema.CodeNotFound:
		status = http.StatusNotFound
	case schema.CodeInternal, schema.CodeOutcomeUnknown, schema.CodeNotCommitted:
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(ActionError{Error: d})
}

// relay sends req on subject and decodes the reply into out, or returns
// the refusal.
func (s *Server) relay(ctx context.Context, subject string, req, out any) *api.ErrorDetail {
	return relayOn(ctx, s.cfg.Conn, subject, req, out)
}

// relayOn is relay on the connection nc.
func relayOn(ctx context.Context, nc *nats.Conn, subject string, req, out any) *api.ErrorDetail {
	if nc == nil {
		return &api.ErrorDetail{Code: schema.CodeInternal, Message: "this projector has no NATS connection for actions"}
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, actionTimeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return &api.ErrorDetail{Code: schema.CodeInternal, Message: "no service answers " + subject}
	}
	if err != nil {
		return &api.ErrorDetail{Code: schema.CodeOutcomeUnknown, Message: subject + ": " + err.Error()}
	}
	var eb api.ErrorBody
	if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != "" {
		return &eb.Error
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return &api.ErrorDetail{Code: schema.CodeInternal, Message: fmt.Sprintf("%s: reply %.200q: %v", subject, m.Data, err)}
	}
	return nil
}

// actionBody decodes a small JSON body (an empty one is {}).
func actionBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "body must be a JSON object: "+err.Error())
		return false
	}
	return true
}

// actionBy defaults an action's by to the dashboard and refuses one over
// 128 bytes.
func actionBy(w http.ResponseWriter, by *string) bool {
	if *by == "" {
		*by = DashboardHolder
	}
	if len(*by) > 128 {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "by must be at most 128 bytes")
		return false
	}
	return true
}

// ResumeRequest is the body of POST /v1/sessions/{id}/resume.
type ResumeRequest struct {
	// By names who resumes (session/resumed data.by); default "dashboard".
	By string `json:"by"`
	// ExpectedSeq, when set, refuses the resume (conflict) if the session
	// moved on since the page showed it.
	ExpectedSeq *uint64 `json:"expectedSeq"`
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var req ResumeRequest
	if !actionBody(w, r, &req) {
		return
	}
	if !actionBy(w, &req.By) {
		return
	}
	if s.cfg.Conn == nil {
		actionFailed(w, api.ErrorDetail{Code: schema.CodeInternal, Message: "this projector has no NATS connection for actions"})
		return
	}
	data, _ := json.Marshal(map[string]string{"by": req.By})
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	res, err := client.New(s.cfg.Conn).Append(ctx, client.AppendRequest{
		SessionID: id, ExpectedSeq: req.ExpectedSeq,
		Events: []schema.Envelope{{SchemaVersion: schema.Version, SessionID: id, Type: schema.TypeSessionResumed, Data: data}},
	})
	if err != nil {
		d := api.ErrorDetail{Code: codeOr(client.CodeOf(err)), Message: err.Error()}
		var ce *client.Error
		if errors.As(err, &ce) {
			d.Message = ce.Message
			if ce.Code == schema.CodeConflict {
				d.CurrentSeq = &ce.CurrentSeq
			}
		}
		actionFailed(w, d)
		return
	}
	writeJSON(w, map[string]any{"sessionId": id, "seq": res.LastSeq, "duplicate": res.Duplicate})
}

func (s *Server) handleRepair(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var req api.RepairRequest
	if !actionBody(w, r, &req) {
		return
	}
	req.SessionID = id
	var reply api.RepairReply
	if d := s.relay(r.Context(), api.SubjectRepair, req, &reply); d != nil {
		actionFailed(w, *d)
		return
	}
	writeJSON(w, reply)
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var req api.ForkRequest
	if !actionBody(w, r, &req) {
		return
	}
	req.ParentID = id
	if req.ChildID != "" && !schema.ValidSessionID(req.ChildID) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "childId must match ^[A-Za-z0-9_-]{1,128}$")
		return
	}
	var reply api.ForkReply
	if d := s.relay(r.Context(), api.SubjectFork, req, &reply); d != nil {
		actionFailed(w, *d)
		return
	}
	writeJSON(w, reply)
}

// EraseRequest is the body of POST /v1/sessions/{id}/erase.
type EraseRequest struct {
	// Reason is kept in the audit record (required).
	Reason string `json:"reason"`
	// By names who erases (default "dashboard").
	By string `json:"by"`
	// Cascade also erases every fork descendant.
	Cascade bool `json:"cascade"`
}

// handleErase relays sessions.api.erase (DESIGN.md section 14) on the
// operator's connection (Config.Operator): only a projector given one may
// erase; any other refuses with forbidden and says who can. The reply is
// the eraser's, passed on as it is (done, or an accepted job with its
// progress).
func (s *Server) handleErase(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var req EraseRequest
	if !actionBody(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Reason) == "" || len(req.Reason) > 1024 {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "reason is required (at most 1024 bytes): it is kept in the audit record")
		return
	}
	if !actionBy(w, &req.By) {
		return
	}
	if s.cfg.Operator == nil {
		apiError(w, http.StatusForbidden, "forbidden", "erasing needs the operator's rights, which this projector was not given: an operator erases with sessionlog erase "+id+" --reason TEXT")
		return
	}
	var reply json.RawMessage
	if d := relayOn(r.Context(), s.cfg.Operator, api.SubjectErase, api.EraseRequest{SessionID: id, Reason: req.Reason, By: req.By, Cascade: req.Cascade}, &reply); d != nil {
		actionFailed(w, *d)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(reply, '\n'))
}

// codeOr is c, or internal for an error without a contract code.
func codeOr(c api.Code) api.Code {
	if c == "" {
		return schema.CodeInternal
	}
	return c
}
