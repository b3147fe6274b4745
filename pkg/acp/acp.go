// Package acp maps sessionlog events to Agent Client Protocol
// `session/update` notifications (DESIGN.md section 15; the mapping is
// written out in docs/acp.md). It is pure: no NATS, no HTTP. The
// projector serves its output as GET /v1/sessions/{id}/acp and
// `sessionlog acp` hands it to an editor.
//
// The mapping is stateless: each event maps to its notifications by
// itself, so a reader that resumes after any seq gets exactly the
// notifications of the events after it, and a replay from seq 1 is what
// ACP's session/load asks for. Every update carries
// _meta.sessionlog {seq, eventId, type} so a client knows where it is.
package acp

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/usage"
)

// Method is the JSON-RPC method of every notification.
const Method = "session/update"

// ProtocolVersion is the ACP version the mapping follows.
const ProtocolVersion = 1

// MetaKey names sessionlog's entry in an update's _meta.
const MetaKey = "sessionlog"

// Notification is one JSON-RPC 2.0 notification, one NDJSON line.
type Notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  Params `json:"params"`
}

// Params are a session/update's params (ACP SessionNotification).
type Params struct {
	SessionID string `json:"sessionId"`
	Update    Update `json:"update"`
}

// Update is one ACP SessionUpdate; SessionUpdate says which variant, and
// only that variant's fields are set.
type Update struct {
	SessionUpdate string `json:"sessionUpdate"`
	// user_message_chunk, agent_message_chunk: Content is a ContentBlock;
	// tool_call, tool_call_update: a []ToolCallContent.
	Content   any    `json:"content,omitempty"`
	MessageID string `json:"messageId,omitempty"`

	ToolCallID string `json:"toolCallId,omitempty"`
	Title      string `json:"title,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Status     string `json:"status,omitempty"`
	RawInput   any    `json:"rawInput,omitempty"`
	RawOutput  any    `json:"rawOutput,omitempty"`

	// plan
	Entries []PlanEntry `json:"entries,omitempty"`

	// session_info_update
	UpdatedAt string `json:"updatedAt,omitempty"`

	// usage_update: Used and Size are required there, so they are
	// pointers that only usage updates set.
	Used *int64 `json:"used,omitempty"`
	Size *int64 `json:"size,omitempty"`

	Meta map[string]any `json:"_meta,omitempty"`
}

// ContentBlock is ACP's text content block, the only kind the mapping
// writes.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ToolCallContent wraps a content block in a tool call.
type ToolCallContent struct {
	Type    string       `json:"type"`
	Content ContentBlock `json:"content"`
}

// PlanEntry is one entry of an ACP plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// ACP update kinds the mapping writes.
const (
	UserMessageChunk  = "user_message_chunk"
	AgentMessageChunk = "agent_message_chunk"
	ToolCall          = "tool_call"
	ToolCallUpdate    = "tool_call_update"
	Plan              = "plan"
	SessionInfoUpdate = "session_info_update"
	UsageUpdate       = "usage_update"
)

// ACP tool call statuses.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
)

// Meta is what _meta.sessionlog holds: where the update comes from, and
// for events without an ACP form their data.
type Meta struct {
	Seq        uint64          `json:"seq"`
	EventID    string          `json:"eventId"`
	Type       string          `json:"type"`
	Time       time.Time       `json:"time"`
	TurnID     string          `json:"turnId,omitempty"`
	StepID     string          `json:"stepId,omitempty"`
	AttemptID  string          `json:"attemptId,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Synthetic  bool            `json:"synthetic,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// metaOf is the _meta of an update made from e; withData adds the event's
// data (for events the ACP fields do not carry whole).
func metaOf(e *schema.Envelope, withData bool) map[string]any {
	m := Meta{Seq: e.Seq, EventID: e.EventID, Type: e.Type, Time: e.Time, TurnID: e.TurnID, StepID: e.StepID,
		AttemptID: e.AttemptID, ToolCallID: e.ToolCallID, Synthetic: e.Synthetic}
	if withData && len(e.Data) > 0 && string(e.Data) != "null" && string(e.Data) != "{}" {
		m.Data = e.Data
	}
	return map[string]any{MetaKey: m}
}

// Notify wraps an update of session id as a notification.
func Notify(id string, u Update) Notification {
	return Notification{JSONRPC: "2.0", Method: Method, Params: Params{SessionID: id, Update: u}}
}

// Map returns the updates of one stored event, in order. Every event
// yields at least one update: those without an ACP form become a
// session_info_update that carries only _meta.
func Map(e *schema.Envelope) []Update {
	switch e.Type {
	case schema.TypeSessionCreated:
		var d schema.SessionCreated
		_ = e.DecodeData(&d)
		return []Update{{SessionUpdate: SessionInfoUpdate, Title: d.Title, UpdatedAt: stamp(e.Time), Meta: metaOf(e, true)}}
	case schema.TypeSessionTitled:
		var d schema.SessionTitled
		_ = e.DecodeData(&d)
		return []Update{{SessionUpdate: SessionInfoUpdate, Title: d.Title, UpdatedAt: stamp(e.Time), Meta: metaOf(e, true)}}
	case schema.TypeMessageUser:
		var d schema.Message
		_ = e.DecodeData(&d)
		return chunks(e, UserMessageChunk, d.Content)
	case schema.TypeMessageAssistant:
		var d schema.Message
		_ = e.DecodeData(&d)
		out := chunks(e, AgentMessageChunk, d.Content)
		if c, ok := usage.Read(d.Usage); ok {
			used, size := c.Context(), c.ContextWindow
			out = append(out, Update{SessionUpdate: UsageUpdate, Used: &used, Size: &size, Meta: metaWith(e, map[string]json.RawMessage{"usage": d.Usage})})
		}
		return out
	case schema.TypeToolRequested:
		var d schema.ToolRequested
		_ = e.DecodeData(&d)
		return []Update{{SessionUpdate: ToolCall, ToolCallID: e.ToolCallID, Title: title(d.Name), Kind: Kind(d.Name),
			Status: StatusPending, RawInput: raw(d.Input), Meta: metaOf(e, d.Idempotent)}}
	case schema.TypeToolStarted:
		return []Update{{SessionUpdate: ToolCallUpdate, ToolCallID: e.ToolCallID, Status: StatusInProgress, Meta: metaOf(e, false)}}
	case schema.TypeToolResult:
		var d schema.ToolResult
		_ = e.DecodeData(&d)
		// The status names what ACP's failed does not (outcome_unknown).
		u := Update{SessionUpdate: ToolCallUpdate, ToolCallID: e.ToolCallID, Status: StatusFailed, Meta: metaWith(e, map[string]string{"status": d.Status})}
		if d.Status == schema.ToolOK {
			u.Status = StatusCompleted
		}
		text := outputText(d.Output)
		switch d.Status {
		case schema.ToolOutcomeUnknown:
			text = "outcome unknown: the call started but its result was never recorded (its agent stopped); check its effect before any retry"
		case schema.ToolNotStarted:
			text = "not started: the call was requested but never started (its agent stopped); it may be run again"
		}
		if len(d.Output) > 0 {
			u.RawOutput = raw(d.Output)
		}
		if text != "" {
			u.Content = []ToolCallContent{{Type: "content", Content: ContentBlock{Type: "text", Text: text}}}
		}
		return []Update{u}
	case schema.TypeGoalUpdated:
		var d schema.GoalUpdated
		_ = e.DecodeData(&d)
		return []Update{{SessionUpdate: Plan, Entries: planOf(&d), Meta: metaOf(e, true)}}
	}
	// Everything else has no ACP form: a metadata-only session info
	// update, whose _meta carries the event.
	return []Update{{SessionUpdate: SessionInfoUpdate, Meta: metaOf(e, true)}}
}

// metaWith is the _meta of an update made from e with data of its own.
func metaWith(e *schema.Envelope, data any) map[string]any {
	m := metaOf(e, false)
	x := m[MetaKey].(Meta)
	x.Data, _ = json.Marshal(data)
	m[MetaKey] = x
	return m
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// title is a tool call's title: ACP requires one.
func title(name string) string {
	if name == "" {
		return "tool call"
	}
	return name
}

// chunks maps message content to chunks of one message, messageId = the
// event id: a string is one text block; an array gives a block per
// element (text elements as their text, others as their JSON); anything
// else is its JSON as text.
func chunks(e *schema.Envelope, kind string, content json.RawMessage) []Update {
	texts := contentTexts(content)
	out := make([]Update, 0, len(texts))
	for _, t := range texts {
		out = append(out, Update{SessionUpdate: kind, Content: ContentBlock{Type: "text", Text: t}, MessageID: e.EventID, Meta: metaOf(e, false)})
	}
	return out
}

func contentTexts(content json.RawMessage) []string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []string{s}
	}
	var arr []json.RawMessage
	if json.Unmarshal(content, &arr) == nil && len(arr) > 0 {
		out := make([]string, 0, len(arr))
		for _, el := range arr {
			out = append(out, blockText(el))
		}
		return out
	}
	return []string{blockText(content)}
}

// blockText is a content element as text: a string, a {"text": ...}
// block's text, or the element's JSON.
func blockText(el json.RawMessage) string {
	var s string
	if json.Unmarshal(el, &s) == nil {
		return s
	}
	var b struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(el, &b) == nil && b.Text != nil {
		return *b.Text
	}
	return string(el)
}

// outputText is a tool output as text (empty for none).
func outputText(out json.RawMessage) string {
	if len(out) == 0 || string(out) == "null" {
		return ""
	}
	return strings.Join(contentTexts(out), "\n")
}

// raw is a JSON value as itself in the update (nil for none).
func raw(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return v
}

// planOf is the goal as a plan: the objective, then each acceptance
// criterion (when acceptance is a list), all completed once the goal is
// done.
func planOf(g *schema.GoalUpdated) []PlanEntry {
	status := StatusPending
	switch g.Status {
	case "active":
		status = StatusInProgress
	case "done":
		status = StatusCompleted
	}
	out := []PlanEntry{{Content: g.Objective, Priority: "high", Status: status}}
	var items []json.RawMessage
	if json.Unmarshal(g.Acceptance, &items) == nil {
		each := StatusPending
		if status == StatusCompleted {
			each = StatusCompleted
		}
		for _, it := range items {
			out = append(out, PlanEntry{Content: blockText(it), Priority: "medium", Status: each})
		}
	} else if len(g.Acceptance) > 0 && string(g.Acceptance) != "null" {
		out = append(out, PlanEntry{Content: blockText(g.Acceptance), Priority: "medium", Status: status})
	}
	return out
}

// kinds maps common tool names to ACP tool kinds (lower-cased).
var kinds = map[string]string{
	"read": "read", "read_file": "read", "view": "read", "cat": "read", "notebookread": "read",
	"edit": "edit", "write": "edit", "multiedit": "edit", "write_file": "edit", "apply_patch": "edit", "notebookedit": "edit", "str_replace_based_edit_tool": "edit",
	"delete": "delete", "rm": "delete",
	"move": "move", "mv": "move",
	"grep": "search", "glob": "search", "search": "search", "find": "search", "ls": "search",
	"bash": "execute", "shell": "execute", "exec": "execute", "exec_command": "execute", "run": "execute", "terminal": "execute",
	"think": "think", "todowrite": "think",
	"fetch": "fetch", "webfetch": "fetch", "websearch": "fetch", "web_search": "fetch",
}

// Kind is the ACP tool kind of a tool name ("other" when unknown).
func Kind(name string) string {
	if k, ok := kinds[strings.ToLower(name)]; ok {
		return k
	}
	return "other"
}
