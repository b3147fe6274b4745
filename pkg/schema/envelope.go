package schema

import (
	"encoding/json"
	"time"
)

// Version is the schema version this code writes and folds.
const Version = 1

// Limits of the contract. MaxEventBytes is a default: services may lower it.
const (
	DefaultMaxEventBytes = 256 << 10
	MaxBatchEvents       = 1000
	MaxIDLen             = 128
	// MaxJSONDepth bounds nesting of any decoded document.
	MaxJSONDepth = 64
)

// Envelope is one stored event (DESIGN.md section 3).
type Envelope struct {
	SchemaVersion int             `json:"schemaVersion"`
	SessionID     string          `json:"sessionId"`
	Seq           uint64          `json:"seq"`
	EventID       string          `json:"eventId"`
	Time          time.Time       `json:"time"`
	Type          string          `json:"type"`
	TurnID        string          `json:"turnId,omitempty"`
	StepID        string          `json:"stepId,omitempty"`
	AttemptID     string          `json:"attemptId,omitempty"`
	ToolCallID    string          `json:"toolCallId,omitempty"`
	Ignorable     bool            `json:"ignorable"`
	Synthetic     bool            `json:"synthetic"`
	Data          json.RawMessage `json:"data"`
}

// The id and type grammars, as patterns for messages; the checks below
// are hand-written because they run for every id of every event.
const (
	sessionIDPattern = `^[A-Za-z0-9_-]{1,128}$`
	itemIDPattern    = `^[A-Za-z0-9_.:-]{1,128}$`
)

// idChars marks the bytes of an id: 1 session ids and item ids, 2 item
// ids only.
var idChars = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = 1
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = 1
		t[c-'a'+'A'] = 1
	}
	t['_'], t['-'] = 1, 1
	t['.'], t[':'] = 2, 2
	return t
}()

// ValidSessionID reports whether id can name a session (and so a subject
// token): it matches ^[A-Za-z0-9_-]{1,128}$.
func ValidSessionID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if idChars[id[i]] != 1 {
			return false
		}
	}
	return true
}

// ValidItemID reports whether id is a valid event, turn, step, attempt,
// tool call, approval, compaction or job id: it matches
// ^[A-Za-z0-9_.:-]{1,128}$.
func ValidItemID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if idChars[id[i]] == 0 {
			return false
		}
	}
	return true
}

// ValidTypeName reports whether t is shaped like an event type
// ("noun/verb"): at most 64 bytes matching
// ^[a-z][a-z0-9_-]*(/[a-z][a-z0-9_-]*)+$.
func ValidTypeName(t string) bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	parts := 0
	start := true // at the first byte of a part
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z':
		case start:
			return false // a part starts with a lower-case letter
		case c >= '0' && c <= '9', c == '_', c == '-':
		case c == '/':
			parts++
			start = true
			continue
		default:
			return false
		}
		start = false
	}
	return parts >= 1 && !start
}

// DecodeData decodes the event's data into v, refusing unknown fields and
// keys not spelled exactly as a field. Absent or null data reads as {}.
func (e *Envelope) DecodeData(v any) error {
	if len(e.Data) == 0 || string(e.Data) == "null" {
		return strictUnmarshal([]byte("{}"), v)
	}
	return exactUnmarshal(e.Data, v)
}

// Data types, one per event type with data (DESIGN.md section 3 table).

type Parent struct {
	SessionID  string `json:"sessionId"`
	SeedLength uint64 `json:"seedLength"`
	Depth      int    `json:"depth"`
}

type SessionCreated struct {
	Title     string            `json:"title,omitempty"`
	Agent     string            `json:"agent,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Workspace string            `json:"workspace,omitempty"`
	Parent    *Parent           `json:"parent,omitempty"`
	// Owner is the agent that created the session (ADR 010): the writer
	// sets it from what the NATS server says of the requester, never from
	// the request. Absent on sessions an operator or a service created, or
	// created before owners existed.
	Owner *Owner `json:"owner,omitempty"`
	// Grants names the other agents (NATS users) of the owner's tenant
	// that may use the session as its owner does.
	Grants []string `json:"grants,omitempty"`
}

// SessionGranted adds agents to a session's grants (SessionCreated.Grants).
type SessionGranted struct {
	Grants []string `json:"grants"`
}

// Owner names an agent: its tenant (NATS account) and its user.
type Owner struct {
	Tenant string `json:"tenant"`
	Agent  string `json:"agent"`
}

type Reason struct {
	Reason string `json:"reason"`
}

type SessionResumed struct {
	By string `json:"by"`
}

// SessionTitled names a session whose session/created had no title (the
// title became known later: an imported file's summary or first prompt).
type SessionTitled struct {
	Title string `json:"title"`
}

// ContextRewound: the model's context continues from the event at ToSeq
// (its id ToEventID); the events after it, up to the rewind, stay in the
// log but are no longer part of what the model sees.
type ContextRewound struct {
	ToEventID string `json:"toEventId"`
	ToSeq     uint64 `json:"toSeq"`
}

type TurnStarted struct {
	Input json.RawMessage `json:"input,omitempty"`
}

type OptReason struct {
	Reason string `json:"reason,omitempty"`
}

type AttemptStarted struct {
	Model string `json:"model,omitempty"`
}

type Message struct {
	Content json.RawMessage `json:"content"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type ToolRequested struct {
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Idempotent bool            `json:"idempotent,omitempty"`
}

type ToolResult struct {
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
}

// ToolLateResult is the data of tool/late-result: a call's result that
// came after a repair closed the call.
type ToolLateResult struct {
	ToolCallID string          `json:"toolCallId"`
	Status     string          `json:"status"`
	Output     json.RawMessage `json:"output,omitempty"`
}

type ApprovalRequested struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId,omitempty"`
	Prompt     string `json:"prompt"`
}

type ApprovalDecided struct {
	ApprovalID string `json:"approvalId"`
	Decision   string `json:"decision"`
	By         string `json:"by,omitempty"`
}

type CompactionStarted struct {
	CompactionID string `json:"compactionId"`
	ThroughSeq   uint64 `json:"throughSeq"`
}

type CompactionEnded struct {
	CompactionID string `json:"compactionId"`
	Summary      string `json:"summary"`
	ThroughSeq   uint64 `json:"throughSeq"`
}

type CompactionAborted struct {
	CompactionID string `json:"compactionId"`
	Reason       string `json:"reason"`
}

type GoalUpdated struct {
	Revision      int             `json:"revision"`
	Objective     string          `json:"objective"`
	Acceptance    json.RawMessage `json:"acceptance,omitempty"`
	Phase         string          `json:"phase,omitempty"`
	Budget        json.RawMessage `json:"budget,omitempty"`
	Status        string          `json:"status"`
	BlockedReason string          `json:"blockedReason,omitempty"`
}

type JobStarted struct {
	JobID   string          `json:"jobId"`
	Command json.RawMessage `json:"command,omitempty"`
}

type JobEnded struct {
	JobID    string `json:"jobId"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Closed names one item a repair closed.
type Closed struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// TurnID scopes steps and attempts.
	TurnID string `json:"turnId,omitempty"`
}

type RepairApplied struct {
	Reason         string     `json:"reason"`
	Closed         []Closed   `json:"closed"`
	LeaseExpiredAt *time.Time `json:"leaseExpiredAt,omitempty"`
	PlannedAtSeq   uint64     `json:"plannedAtSeq,omitempty"`
}

type ForkCommitted struct {
	SeedLength uint64 `json:"seedLength"`
}
