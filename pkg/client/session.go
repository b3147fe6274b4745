package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/oklog/ulid/v2"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Session is one agent's handle on a session it holds. It appends with an
// explicit expectedSeq (the last seq it knows), so anything else that
// wrote to the session in between (the repairer, another process) turns
// into ErrConflict instead of being silently built upon; Reload then
// catches up. Methods are serialized: a session's log is written in order.
//
// The helpers return only once their event is durable (acknowledged by
// JetStream through the writer), which is the checkpoint policy of
// DESIGN.md section 7: StartAttempt before the LLM request, StartTool
// before the side effect, EndTurn before the turn is reported complete.
type Session struct {
	c      *Client
	id     string
	holder string

	mu    sync.Mutex
	state *session.State
	// stale: the local state may disagree with the log; Reload first.
	stale bool
	// seq mirrors state.LastSeq for Live, which must not wait for an
	// append in flight.
	seq atomic.Uint64
}

// ErrStale is returned while a Session must Reload: an append conflicted
// or its outcome stayed unknown.
var ErrStale = errors.New("client: session state is stale: Reload before appending")

// Create appends session/created (expectedSeq 0: the session must not
// exist) and returns the session held by holder.
func (c *Client) Create(ctx context.Context, sessionID, holder string, meta schema.SessionCreated) (*Session, error) {
	s := &Session{c: c, id: sessionID, holder: holder, state: session.New(sessionID)}
	data, err := json.Marshal(meta)
	if err != nil {
		return nil, errorf(schema.CodeInvalidEvent, "session/created data: %v", err)
	}
	if _, err := s.Append(ctx, schema.Envelope{Type: schema.TypeSessionCreated, Data: data}); err != nil {
		return nil, err
	}
	return s, nil
}

// Open loads an existing session from the log (through the client's
// connection) and returns it held by holder. Open does not take the
// session's lease: while another holder's lease is live, appends and
// heartbeats are refused with ErrConflict naming it. A recovering agent
// that knows the former holder is gone calls TakeOver.
func (c *Client) Open(ctx context.Context, sessionID, holder string) (*Session, error) {
	return c.OpenFrom(ctx, c, sessionID, holder)
}

// OpenFrom is Open reading the log through r.
func (c *Client) OpenFrom(ctx context.Context, r Reader, sessionID, holder string) (*Session, error) {
	st, err := Load(ctx, r, sessionID)
	if err != nil {
		return nil, err
	}
	if !st.Exists() {
		return nil, errorf(schema.CodeNotFound, "session %s does not exist", sessionID)
	}
	s := &Session{c: c, id: sessionID, holder: holder, state: st}
	s.seq.Store(st.LastSeq)
	return s, nil
}

// ID is the session id.
func (s *Session) ID() string { return s.id }

// Holder is the holder this session appends as.
func (s *Session) Holder() string { return s.holder }

// LastSeq is the last seq this session knows to be stored.
func (s *Session) LastSeq() uint64 { return s.seq.Load() }

// State returns a copy of the session's state as this handle knows it.
func (s *Session) State() *session.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Clone()
}

// Reload re-reads the session from the log through the client's
// connection.
func (s *Session) Reload(ctx context.Context) error { return s.ReloadFrom(ctx, s.c) }

// ReloadFrom re-reads the session through r.
func (s *Session) ReloadFrom(ctx context.Context, r Reader) error {
	st, err := Load(ctx, r, s.id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.state, s.stale = st, false
	s.seq.Store(st.LastSeq)
	s.mu.Unlock()
	return nil
}

// Append appends events after the last seq this session knows and folds
// them into its state once committed. It is the primitive every helper
// uses; use it directly for events the helpers do not cover.
func (s *Session) Append(ctx context.Context, events ...schema.Envelope) (AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendLocked(ctx, events...)
}

func (s *Session) appendLocked(ctx context.Context, events ...schema.Envelope) (AppendResult, error) {
	if s.stale {
		return AppendResult{}, ErrStale
	}
	// Ids and times are chosen here, so the local fold matches the log.
	now := s.c.now().UTC()
	for i := range events {
		if events[i].EventID == "" {
			events[i].EventID = ulid.Make().String()
		}
		if events[i].Time.IsZero() {
			events[i].Time = now
		}
	}
	res, err := s.c.Append(ctx, AppendRequest{SessionID: s.id, ExpectedSeq: Seq(s.state.LastSeq), Holder: s.holder, Events: events})
	if err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrOutcomeUnknown) {
			s.stale = true
		}
		return res, err
	}
	for i := range events {
		e := events[i]
		e.Seq, e.SessionID = res.FirstSeq+uint64(i), s.id
		if err := s.state.Apply(&e); err != nil {
			// The writer accepted what this fold refuses: trust the log.
			s.stale = true
			return res, fmt.Errorf("client: committed event %d does not fold locally (%v): %w", i, err, ErrStale)
		}
	}
	s.seq.Store(s.state.LastSeq)
	return res, nil
}

func (s *Session) turnLocked() (string, error) {
	if s.state.Turn == nil {
		return "", errorf(schema.CodeStructure, "no open turn")
	}
	return s.state.Turn.ID, nil
}

// inTurn appends one event of the open turn.
func (s *Session) inTurn(ctx context.Context, e schema.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.turnLocked()
	if err != nil {
		return err
	}
	e.TurnID = t
	_, err = s.appendLocked(ctx, e)
	return err
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("client: encode event data: %v", err))
	}
	return b
}

func newID() string { return ulid.Make().String() }

// StartTurn opens a turn and returns its id.
func (s *Session) StartTurn(ctx context.Context, input json.RawMessage) (string, error) {
	id := newID()
	_, err := s.Append(ctx, schema.Envelope{Type: schema.TypeTurnStarted, TurnID: id, Data: raw(schema.TurnStarted{Input: input})})
	return id, err
}

// UserMessage records a user message in the open turn (or outside any
// turn when none is open).
func (s *Session) UserMessage(ctx context.Context, content json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := schema.Envelope{Type: schema.TypeMessageUser, Data: raw(schema.Message{Content: content})}
	if s.state.Turn != nil {
		e.TurnID = s.state.Turn.ID
	}
	_, err := s.appendLocked(ctx, e)
	return err
}

// StartStep opens a step of the open turn.
func (s *Session) StartStep(ctx context.Context) (string, error) {
	id := newID()
	return id, s.inTurn(ctx, schema.Envelope{Type: schema.TypeStepStarted, StepID: id, Data: raw(schema.OptReason{})})
}

// EndStep ends a step.
func (s *Session) EndStep(ctx context.Context, stepID, reason string) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeStepEnded, StepID: stepID, Data: raw(schema.OptReason{Reason: reason})})
}

// StartAttempt records attempt/started and returns the attempt id only
// once it is durable: that is what permits the LLM request.
func (s *Session) StartAttempt(ctx context.Context, model string) (string, error) {
	id := newID()
	if err := s.inTurn(ctx, schema.Envelope{Type: schema.TypeAttemptStarted, AttemptID: id, Data: raw(schema.AttemptStarted{Model: model})}); err != nil {
		return "", err
	}
	return id, nil
}

// FinishAttempt records the attempt's complete reply (message/assistant).
func (s *Session) FinishAttempt(ctx context.Context, attemptID string, content, usage json.RawMessage) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeMessageAssistant, AttemptID: attemptID, Data: raw(schema.Message{Content: content, Usage: usage})})
}

// InterruptAttempt records that the attempt produced no complete reply.
func (s *Session) InterruptAttempt(ctx context.Context, attemptID, reason string) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeAttemptInterrupt, AttemptID: attemptID, Data: raw(schema.Reason{Reason: reason})})
}

// RunAttempt is the enforced path for an LLM call: attempt/started is made
// durable, then call runs, then its reply (message/assistant) or the
// interruption is recorded. call never runs if attempt/started was not
// committed.
func (s *Session) RunAttempt(ctx context.Context, model string, call func(ctx context.Context, attemptID string) (content, usage json.RawMessage, err error)) (json.RawMessage, error) {
	id, err := s.StartAttempt(ctx, model)
	if err != nil {
		return nil, err
	}
	content, usage, cerr := call(ctx, id)
	if cerr != nil {
		if err := s.InterruptAttempt(ctx, id, schema.Clip(cerr.Error(), 80)); err != nil {
			return nil, errors.Join(cerr, err)
		}
		return nil, cerr
	}
	return content, s.FinishAttempt(ctx, id, content, usage)
}

// ToolCall describes a tool call to request.
type ToolCall struct {
	// ID is the tool call id (generated when empty).
	ID         string
	Name       string
	Input      json.RawMessage
	Idempotent bool
}

// RequestTool records tool/requested in the open turn and returns the call id.
func (s *Session) RequestTool(ctx context.Context, call ToolCall) (string, error) {
	if call.ID == "" {
		call.ID = newID()
	}
	in := call.Input
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	err := s.inTurn(ctx, schema.Envelope{Type: schema.TypeToolRequested, ToolCallID: call.ID,
		Data: raw(schema.ToolRequested{Name: call.Name, Input: in, Idempotent: call.Idempotent})})
	return call.ID, err
}

// StartTool records tool/started and returns only once it is durable: the
// side effect may begin only after a nil return. On any error the side
// effect must not run (an unknown outcome included: the repairer or a
// Reload tells what is stored).
func (s *Session) StartTool(ctx context.Context, callID string) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeToolStarted, ToolCallID: callID})
}

// ToolResult records a call's result (status ok, error, not_started or
// outcome_unknown).
func (s *Session) ToolResult(ctx context.Context, callID, status string, output json.RawMessage) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeToolResult, ToolCallID: callID, Data: raw(schema.ToolResult{Status: status, Output: output})})
}

// RunTool is the enforced path for a side effect: the call is requested
// (unless it already is), tool/started is made durable, and only then does
// fn run; its output is recorded as status ok, its error as status error
// (with the error text as output). fn never runs when tool/started was not
// committed. If recording the result fails, the side effect has happened:
// do not run it again; Reload (or the repairer) settles the record.
func (s *Session) RunTool(ctx context.Context, call ToolCall, fn func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	s.mu.Lock()
	requested := s.state.KnownTool(call.ID)
	s.mu.Unlock()
	if call.ID == "" || !requested {
		id, err := s.RequestTool(ctx, call)
		if err != nil {
			return nil, err
		}
		call.ID = id
	}
	if err := s.StartTool(ctx, call.ID); err != nil {
		return nil, err
	}
	out, ferr := fn(ctx)
	status, rec := schema.ToolOK, out
	if ferr != nil {
		status, rec = schema.ToolError, raw(map[string]string{"error": ferr.Error()})
	}
	if err := s.ToolResult(ctx, call.ID, status, rec); err != nil {
		return out, errors.Join(ferr, fmt.Errorf("client: tool %s ran but its result is not recorded: %w", call.ID, err))
	}
	return out, ferr
}

// RequestApproval records approval/requested (optionally for a tool call)
// and returns the approval id.
func (s *Session) RequestApproval(ctx context.Context, toolCallID, prompt string) (string, error) {
	id := newID()
	err := s.inTurn(ctx, schema.Envelope{Type: schema.TypeApprovalRequested, Data: raw(schema.ApprovalRequested{ApprovalID: id, ToolCallID: toolCallID, Prompt: prompt})})
	return id, err
}

// DecideApproval records the decision (approved, denied, expired); a
// decision is never implied.
func (s *Session) DecideApproval(ctx context.Context, approvalID, decision, by string) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeApprovalDecided, Data: raw(schema.ApprovalDecided{ApprovalID: approvalID, Decision: decision, By: by})})
}

// EndTurn records turn/ended and returns only once it is durable: a nil
// return is what reports the turn complete.
func (s *Session) EndTurn(ctx context.Context, reason string) error {
	return s.inTurn(ctx, schema.Envelope{Type: schema.TypeTurnEnded, Data: raw(schema.Reason{Reason: reason})})
}

// UpdateGoal records goal/updated; a zero Revision becomes the next one.
// It returns once durable (a turn's goal update precedes its EndTurn).
func (s *Session) UpdateGoal(ctx context.Context, g schema.GoalUpdated) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.Revision == 0 {
		g.Revision = 1
		if s.state.Goal != nil {
			g.Revision = s.state.Goal.Revision + 1
		}
	}
	_, err := s.appendLocked(ctx, schema.Envelope{Type: schema.TypeGoalUpdated, Data: raw(g)})
	return err
}

// StartJob records a background process (in the open turn, if any).
func (s *Session) StartJob(ctx context.Context, jobID string, command json.RawMessage) (string, error) {
	if jobID == "" {
		jobID = newID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := schema.Envelope{Type: schema.TypeJobStarted, Data: raw(schema.JobStarted{JobID: jobID, Command: command})}
	if s.state.Turn != nil {
		e.TurnID = s.state.Turn.ID
	}
	_, err := s.appendLocked(ctx, e)
	return jobID, err
}

// EndJob records the end of a background process (status exited or failed).
func (s *Session) EndJob(ctx context.Context, jobID, status string, exitCode *int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := schema.Envelope{Type: schema.TypeJobEnded, Data: raw(schema.JobEnded{JobID: jobID, Status: status, ExitCode: exitCode})}
	if j, ok := s.state.Jobs[jobID]; ok {
		e.TurnID = j.TurnID
	}
	_, err := s.appendLocked(ctx, e)
	return err
}

// Resume records session/resumed (after a pause or a repair).
func (s *Session) Resume(ctx context.Context, by string) error {
	_, err := s.Append(ctx, schema.Envelope{Type: schema.TypeSessionResumed, Data: raw(schema.SessionResumed{By: by})})
	return err
}

// Pause records session/paused.
func (s *Session) Pause(ctx context.Context, reason string) error {
	_, err := s.Append(ctx, schema.Envelope{Type: schema.TypeSessionPaused, Data: raw(schema.Reason{Reason: reason})})
	return err
}

// Close records session/closed: nothing may follow.
func (s *Session) Close(ctx context.Context, reason string) error {
	_, err := s.Append(ctx, schema.Envelope{Type: schema.TypeSessionClosed, Data: raw(schema.Reason{Reason: reason})})
	return err
}

// Heartbeat renews the holder's lease.
func (s *Session) Heartbeat(ctx context.Context) (HeartbeatResult, error) {
	return s.c.Heartbeat(ctx, s.id, s.holder)
}

// TakeOver takes the session's lease for this handle's holder even while
// another holder's lease is live: the deliberate step of a recovering
// agent (Open after a crash, under a new holder name) once it knows the
// former holder is gone.
func (s *Session) TakeOver(ctx context.Context) (HeartbeatResult, error) {
	return s.c.TakeOver(ctx, s.id, s.holder)
}

// liveEvent is a transient event on sessions.live.<id>.
// Live publishes a transient event (a token delta, output chunk,
// progress) on sessions.live.<id>, ordered after the last durable seq. It
// is never stored and never waited for: it does not wait for an append in
// flight, and publishes without a flush.
func (s *Session) Live(ctx context.Context, data json.RawMessage) error {
	if !schema.ValidSessionID(s.id) {
		return schema.Errorf(schema.CodeBadRequest, "session id %q must match ^[A-Za-z0-9_-]{1,128}$", schema.Clip(s.id, 80))
	}
	body, err := json.Marshal(api.LiveEvent{SessionID: s.id, AfterSeq: s.LastSeq(), Data: data})
	if err != nil {
		return err
	}
	return s.c.nc.Publish(api.LiveSubject(s.id), body)
}
