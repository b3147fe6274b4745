package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Event type names (DESIGN.md section 3).
const (
	TypeSessionCreated    = "session/created"
	TypeSessionPaused     = "session/paused"
	TypeSessionResumed    = "session/resumed"
	TypeSessionClosed     = "session/closed"
	TypeTurnStarted       = "turn/started"
	TypeTurnEnded         = "turn/ended"
	TypeStepStarted       = "step/started"
	TypeStepEnded         = "step/ended"
	TypeAttemptStarted    = "attempt/started"
	TypeMessageAssistant  = "message/assistant"
	TypeAttemptInterrupt  = "attempt/interrupted"
	TypeMessageUser       = "message/user"
	TypeToolRequested     = "tool/requested"
	TypeToolStarted       = "tool/started"
	TypeToolResult        = "tool/result"
	TypeApprovalRequested = "approval/requested"
	TypeApprovalDecided   = "approval/decided"
	TypeCompactionStarted = "compaction/started"
	TypeCompactionEnded   = "compaction/ended"
	TypeCompactionAborted = "compaction/aborted"
	TypeGoalUpdated       = "goal/updated"
	TypeJobStarted        = "job/started"
	TypeJobEnded          = "job/ended"
	TypeRepairApplied     = "repair/applied"
	TypeForkCommitted     = "fork/committed"
	TypeContextRewound    = "context/rewound"
	TypeSessionTitled     = "session/titled"
	// TypeSessionGranted lets more agents of the owner's tenant use the
	// session (ADR 010); only the owner or an operator writes it.
	TypeSessionGranted = "session/granted"
	// TypeToolLateResult (ignorable) records a result that came after a
	// repair had closed its call: the repair's result stands.
	TypeToolLateResult = "tool/late-result"
)

// Enumerated data values.
const (
	TurnCompleted   = "completed"
	TurnInterrupted = "interrupted"
	TurnAborted     = "aborted"
	TurnFailed      = "failed"

	ToolOK             = "ok"
	ToolError          = "error"
	ToolNotStarted     = "not_started"
	ToolOutcomeUnknown = "outcome_unknown"

	DecisionApproved = "approved"
	DecisionDenied   = "denied"
	DecisionExpired  = "expired"

	JobExited   = "exited"
	JobFailed   = "failed"
	JobOrphaned = "orphaned"

	WorkspaceShared   = "shared"
	WorkspaceIsolated = "isolated"
)

// ID names an envelope id field.
type ID int

const (
	IDTurn ID = 1 << iota
	IDStep
	IDAttempt
	IDToolCall
)

// Spec is what the registry knows about one event type.
type Spec struct {
	Type string
	// Required envelope ids.
	IDs ID
	// OptionalTurn: turnId may be given (message/user, jobs, compactions).
	OptionalTurn bool
	// ServiceOnly types are written by sessionlog's own services
	// (repairer, forker), never accepted from an agent.
	ServiceOnly bool
	// Ignorable types are registered for their data checks but are
	// always marked ignorable: an older reader may skip them.
	Ignorable bool
	// check decodes and validates data.
	check func(e *Envelope) error
}

type envelopeID struct {
	id      ID
	name, v string
}

func (e *Envelope) ids() [4]envelopeID {
	return [4]envelopeID{{IDTurn, "turnId", e.TurnID}, {IDStep, "stepId", e.StepID}, {IDAttempt, "attemptId", e.AttemptID}, {IDToolCall, "toolCallId", e.ToolCallID}}
}

// CheckIDs checks that e carries exactly the envelope ids its type takes;
// the error is an *Error with CodeInvalidEvent.
func (s *Spec) CheckIDs(e *Envelope) error {
	for _, f := range e.ids() {
		switch {
		case s.IDs&f.id != 0 && f.v == "":
			return Errorf(CodeInvalidEvent, "%s requires %s", s.Type, f.name)
		case s.IDs&f.id == 0 && f.v != "" && !(f.id == IDTurn && s.OptionalTurn):
			return Errorf(CodeInvalidEvent, "%s does not take %s", s.Type, f.name)
		}
	}
	return nil
}

func oneOf(field, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("data.%s must be one of %v, got %q", field, allowed, v)
}

func need(field, v string) error {
	if v == "" {
		return fmt.Errorf("data.%s is required", field)
	}
	return nil
}

func needID(field, v string) error {
	if v == "" {
		return fmt.Errorf("data.%s is required", field)
	}
	if !ValidItemID(v) {
		return fmt.Errorf("data.%s %q is not a valid id", field, Clip(v, 40))
	}
	return nil
}

func needSeq(field string, v uint64) error {
	if v < 1 {
		return fmt.Errorf("data.%s must be >= 1", field)
	}
	return nil
}

func needJSON(field string, v json.RawMessage) error {
	if len(v) == 0 || string(v) == "null" {
		return fmt.Errorf("data.%s is required", field)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func dataCheck[T any](validate func(*T) error) func(e *Envelope) error {
	return func(e *Envelope) error {
		var v T
		if err := e.DecodeData(&v); err != nil {
			return fmt.Errorf("data: %v", err)
		}
		if validate == nil {
			return nil
		}
		return validate(&v)
	}
}

var registry = map[string]*Spec{}

func register(s *Spec) { registry[s.Type] = s }

func init() {
	register(&Spec{Type: TypeSessionCreated, check: dataCheck(func(d *SessionCreated) error {
		if d.Workspace != "" {
			if err := oneOf("workspace", d.Workspace, WorkspaceShared, WorkspaceIsolated); err != nil {
				return err
			}
		}
		if p := d.Parent; p != nil {
			if !ValidSessionID(p.SessionID) {
				return fmt.Errorf("data.parent.sessionId %q is not a valid session id", Clip(p.SessionID, 40))
			}
			if p.SeedLength < 1 || p.Depth < 1 {
				return fmt.Errorf("data.parent needs seedLength >= 1 and depth >= 1")
			}
		}
		if o := d.Owner; o != nil && (!ValidSessionID(o.Tenant) || !ValidSessionID(o.Agent)) {
			return fmt.Errorf("data.owner needs a tenant and an agent of [A-Za-z0-9_-]")
		}
		for _, g := range d.Grants {
			if !ValidSessionID(g) {
				return fmt.Errorf("data.grants: %q is not an agent name of [A-Za-z0-9_-]", Clip(g, 40))
			}
		}
		return nil
	})})
	register(&Spec{Type: TypeSessionPaused, check: dataCheck(func(d *Reason) error { return need("reason", d.Reason) })})
	register(&Spec{Type: TypeSessionResumed, check: dataCheck(func(d *SessionResumed) error { return need("by", d.By) })})
	register(&Spec{Type: TypeSessionClosed, check: dataCheck(func(d *Reason) error { return need("reason", d.Reason) })})
	register(&Spec{Type: TypeSessionTitled, check: dataCheck(func(d *SessionTitled) error { return need("title", d.Title) })})
	register(&Spec{Type: TypeSessionGranted, check: dataCheck(func(d *SessionGranted) error {
		if len(d.Grants) == 0 {
			return fmt.Errorf("data.grants names no agent")
		}
		for _, g := range d.Grants {
			if !ValidSessionID(g) {
				return fmt.Errorf("data.grants: %q is not an agent name of [A-Za-z0-9_-]", Clip(g, 40))
			}
		}
		return nil
	})})
	register(&Spec{Type: TypeContextRewound, check: dataCheck(func(d *ContextRewound) error {
		return firstErr(need("toEventId", d.ToEventID), needSeq("toSeq", d.ToSeq))
	})})
	register(&Spec{Type: TypeTurnStarted, IDs: IDTurn, check: dataCheck[TurnStarted](nil)})
	register(&Spec{Type: TypeTurnEnded, IDs: IDTurn, check: dataCheck(func(d *Reason) error {
		return oneOf("reason", d.Reason, TurnCompleted, TurnInterrupted, TurnAborted, TurnFailed)
	})})
	register(&Spec{Type: TypeStepStarted, IDs: IDTurn | IDStep, check: dataCheck[OptReason](nil)})
	register(&Spec{Type: TypeStepEnded, IDs: IDTurn | IDStep, check: dataCheck[OptReason](nil)})
	register(&Spec{Type: TypeAttemptStarted, IDs: IDTurn | IDAttempt, check: dataCheck[AttemptStarted](nil)})
	register(&Spec{Type: TypeMessageAssistant, IDs: IDTurn | IDAttempt, check: dataCheck(func(d *Message) error { return needJSON("content", d.Content) })})
	register(&Spec{Type: TypeAttemptInterrupt, IDs: IDTurn | IDAttempt, check: dataCheck(func(d *Reason) error { return need("reason", d.Reason) })})
	register(&Spec{Type: TypeMessageUser, OptionalTurn: true, check: dataCheck(func(d *Message) error { return needJSON("content", d.Content) })})
	register(&Spec{Type: TypeToolRequested, IDs: IDTurn | IDToolCall, check: dataCheck(func(d *ToolRequested) error {
		return firstErr(need("name", d.Name), needJSON("input", d.Input))
	})})
	register(&Spec{Type: TypeToolStarted, IDs: IDTurn | IDToolCall, check: dataCheck[struct{}](nil)})
	register(&Spec{Type: TypeToolResult, IDs: IDTurn | IDToolCall, check: dataCheck(func(d *ToolResult) error {
		return oneOf("status", d.Status, ToolOK, ToolError, ToolNotStarted, ToolOutcomeUnknown)
	})})
	register(&Spec{Type: TypeApprovalRequested, IDs: IDTurn, check: dataCheck(func(d *ApprovalRequested) error {
		err := firstErr(needID("approvalId", d.ApprovalID), need("prompt", d.Prompt))
		if err == nil && d.ToolCallID != "" && !ValidItemID(d.ToolCallID) {
			err = fmt.Errorf("data.toolCallId %q is not a valid id", Clip(d.ToolCallID, 40))
		}
		return err
	})})
	register(&Spec{Type: TypeApprovalDecided, IDs: IDTurn, check: dataCheck(func(d *ApprovalDecided) error {
		return firstErr(needID("approvalId", d.ApprovalID), oneOf("decision", d.Decision, DecisionApproved, DecisionDenied, DecisionExpired))
	})})
	register(&Spec{Type: TypeCompactionStarted, OptionalTurn: true, check: dataCheck(func(d *CompactionStarted) error {
		return firstErr(needID("compactionId", d.CompactionID), needSeq("throughSeq", d.ThroughSeq))
	})})
	register(&Spec{Type: TypeCompactionEnded, OptionalTurn: true, check: dataCheck(func(d *CompactionEnded) error {
		return firstErr(needID("compactionId", d.CompactionID), need("summary", d.Summary), needSeq("throughSeq", d.ThroughSeq))
	})})
	register(&Spec{Type: TypeCompactionAborted, OptionalTurn: true, check: dataCheck(func(d *CompactionAborted) error {
		return firstErr(needID("compactionId", d.CompactionID), need("reason", d.Reason))
	})})
	register(&Spec{Type: TypeGoalUpdated, check: dataCheck(func(d *GoalUpdated) error {
		if d.Revision < 1 {
			return fmt.Errorf("data.revision must be >= 1")
		}
		return firstErr(need("objective", d.Objective), oneOf("status", d.Status, "active", "paused", "blocked", "done"))
	})})
	register(&Spec{Type: TypeJobStarted, OptionalTurn: true, check: dataCheck(func(d *JobStarted) error { return needID("jobId", d.JobID) })})
	register(&Spec{Type: TypeJobEnded, OptionalTurn: true, check: dataCheck(func(d *JobEnded) error {
		return firstErr(needID("jobId", d.JobID), oneOf("status", d.Status, JobExited, JobFailed, JobOrphaned))
	})})
	register(&Spec{Type: TypeRepairApplied, ServiceOnly: true, check: dataCheck(func(d *RepairApplied) error {
		if err := need("reason", d.Reason); err != nil {
			return err
		}
		if d.Closed == nil {
			return fmt.Errorf("data.closed is required (a list, possibly empty)")
		}
		for i, c := range d.Closed {
			if err := firstErr(need(fmt.Sprintf("closed[%d].kind", i), c.Kind), needID(fmt.Sprintf("closed[%d].id", i), c.ID)); err != nil {
				return err
			}
		}
		return nil
	})})
	register(&Spec{Type: TypeToolLateResult, Ignorable: true, check: dataCheck(func(d *ToolLateResult) error {
		return firstErr(needID("toolCallId", d.ToolCallID), oneOf("status", d.Status, ToolOK, ToolError))
	})})
	register(&Spec{Type: TypeForkCommitted, ServiceOnly: true, check: dataCheck(func(d *ForkCommitted) error {
		return needSeq("seedLength", d.SeedLength)
	})})
	buildSpecTable()
}

// Lookup returns the spec of a known type.
func Lookup(typ string) (*Spec, bool) {
	s := specOf(typ)
	return s, s != nil
}

// Types returns every registered type name.
func Types() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	return out
}

// Known reports whether this reader can fold e: a registered type, or an
// unknown one marked ignorable.
func Known(e *Envelope) bool {
	return e.Ignorable || specOf(e.Type) != nil
}

// Origin says who writes an event; agents may not write service events.
type Origin int

const (
	OriginAgent Origin = iota
	OriginService
)

// ValidateOptions tunes Validate.
type ValidateOptions struct {
	Origin Origin
	// MaxEventBytes bounds the encoded event; 0 means DefaultMaxEventBytes,
	// a negative value no limit.
	MaxEventBytes int
	// Stored: the event came from the log, so seq, time and schemaVersion
	// must already be set.
	Stored bool
	// DataChecked: the data already passed CheckJSON with MaxJSONDepth,
	// as part of the larger document it came in (a request body checked
	// whole), so Validate does not scan it again.
	DataChecked bool
}

// Validate checks one event against the registry. It returns an *Error with
// CodeInvalidEvent, CodeUnknownType or CodeTooLarge.
func Validate(e *Envelope, opt ValidateOptions) error {
	bad := func(format string, args ...any) error { return Errorf(CodeInvalidEvent, format, args...) }
	limit := opt.MaxEventBytes
	if limit == 0 {
		limit = DefaultMaxEventBytes
	}
	if limit > 0 && len(e.Data) > limit {
		return Errorf(CodeTooLarge, "data is %d bytes, limit %d", len(e.Data), limit)
	}
	if e.SchemaVersion > Version {
		return bad("schemaVersion %d is newer than %d", e.SchemaVersion, Version)
	}
	if e.SchemaVersion < 0 {
		return bad("schemaVersion %d is negative", e.SchemaVersion)
	}
	if opt.Stored {
		if e.SchemaVersion != Version {
			return bad("schemaVersion %d, want %d", e.SchemaVersion, Version)
		}
		if e.Seq == 0 {
			return bad("seq is required")
		}
		if e.Time.IsZero() {
			return bad("time is required")
		}
		if e.SessionID == "" {
			return bad("sessionId is required")
		}
		if e.EventID == "" {
			return bad("eventId is required")
		}
	}
	// A request may leave the session id to the request; one that is given
	// must be usable as a subject token.
	if e.SessionID != "" && !ValidSessionID(e.SessionID) {
		return bad("sessionId %q is not a valid session id (%s)", Clip(e.SessionID, 40), sessionIDPattern)
	}
	if e.EventID != "" && !ValidItemID(e.EventID) {
		return bad("eventId %q is not a valid id (%s, at most %d)", Clip(e.EventID, 40), itemIDPattern, MaxIDLen)
	}
	if e.Type == "" {
		return bad("type is required")
	}
	if !ValidTypeName(e.Type) {
		return bad("type %q is not a valid type name", Clip(e.Type, 40))
	}
	if opt.Origin == OriginAgent && e.Synthetic {
		return bad("synthetic events are written only by sessionlog services")
	}
	for _, f := range e.ids() {
		if f.v != "" && !ValidItemID(f.v) {
			return bad("%s %q is not a valid id", f.name, Clip(f.v, 40))
		}
	}
	if err := validData(e.Data, opt.DataChecked); err != nil {
		return bad("data: %v", err)
	}
	if err := validateType(e, opt); err != nil {
		return err
	}
	if limit > 0 {
		// The stored body is the encoded envelope, escapes included.
		c := *e
		b, err := Encode(&c)
		if err != nil {
			return bad("cannot encode: %v", err)
		}
		if len(b) > limit {
			return Errorf(CodeTooLarge, "event is %d bytes encoded, limit %d", len(b), limit)
		}
	}
	return nil
}

// validData: absent, null, or one well-formed JSON object.
func validData(d json.RawMessage, checked bool) error {
	if len(d) == 0 {
		return nil
	}
	if !checked {
		if err := CheckJSON(d, MaxJSONDepth); err != nil {
			return err
		}
	}
	// CheckJSON passed: one value, so its first byte tells its kind.
	if t := bytes.TrimLeft(d, " \t\r\n"); t[0] != '{' && t[0] != 'n' {
		return errors.New("data must be a JSON object")
	}
	return nil
}

func validateType(e *Envelope, opt ValidateOptions) error {
	bad := func(format string, args ...any) error { return Errorf(CodeInvalidEvent, format, args...) }
	spec := specOf(e.Type)
	if spec == nil {
		if !e.Ignorable {
			return Errorf(CodeUnknownType, "unknown event type %q (not ignorable)", Clip(e.Type, 40))
		}
		return nil
	}
	if e.Ignorable != spec.Ignorable {
		if spec.Ignorable {
			return bad("type %q must be marked ignorable", e.Type)
		}
		return bad("type %q is a known required type and cannot be marked ignorable", e.Type)
	}
	if opt.Origin == OriginAgent && spec.ServiceOnly {
		return bad("type %q is written only by sessionlog services", e.Type)
	}
	if err := spec.CheckIDs(e); err != nil {
		return err
	}
	if err := spec.check(e); err != nil {
		return bad("%s: %v", e.Type, err)
	}
	return nil
}

// Clip bounds s to n bytes for an error message or a log line: cut at a
// rune boundary, "..." said where it was cut. Every package clips with it.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
