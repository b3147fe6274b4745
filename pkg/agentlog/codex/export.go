package codex

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Export writes x as a rollout file: the source lines as they are, then
// the events that follow them (all events for a session from elsewhere),
// then an error result for every call still without one.
func (Format) Export(w io.Writer, x *agentlog.Export) error {
	bw := bufio.NewWriter(w)
	ex := &exporter{w: bw, custom: map[string]bool{}, answered: map[string]bool{}}
	for _, l := range x.Lines {
		ex.raw(l)
		ex.learn(l)
	}
	// A call of the file's last model response was never complete in
	// sessionlog: it is answered before what happened after the file.
	for _, id := range ex.requested {
		if !ex.answered[id] && x.State.Tools[agentlog.ItemID(id)] == nil {
			ex.result(ex.at, id, "", nil, "")
		}
	}
	if len(x.Lines) == 0 {
		ex.meta(x)
	}
	// codex's compacted replaces everything before it, so a compaction
	// is written before the first event after the last one it replaces:
	// what the model sees after it is the same.
	var compactions []schema.CompactionEnded
	for i := range x.Events {
		if e := &x.Events[i]; e.Type == schema.TypeCompactionEnded {
			var c schema.CompactionEnded
			_ = e.DecodeData(&c)
			compactions = append(compactions, c)
		}
	}
	sort.SliceStable(compactions, func(a, b int) bool { return compactions[a].ThroughSeq < compactions[b].ThroughSeq })
	for i := range x.Events {
		e := &x.Events[i]
		for len(compactions) > 0 && compactions[0].ThroughSeq < e.Seq {
			ex.line(e.Time, kindCompacted, compactedItem{Message: compactions[0].Summary})
			compactions = compactions[1:]
		}
		ex.event(e)
	}
	for _, c := range compactions {
		ex.line(ex.at, kindCompacted, compactedItem{Message: c.Summary})
	}
	// Every call is answered once: those still open get an error result
	// saying the outcome is unknown.
	for _, id := range ex.requested {
		if !ex.answered[id] {
			ex.result(ex.at, id, "", nil, "")
		}
	}
	if ex.err != nil {
		return ex.err
	}
	return bw.Flush()
}

// exporter writes rollout lines.
type exporter struct {
	w      *bufio.Writer
	err    error
	custom map[string]bool // call id -> requested as a custom tool call
	last   string          // text of the turn's last assistant message
	at     time.Time       // time of the last line written
	// requested: call ids in the order of their requests; answered: those
	// with an output.
	requested []string
	answered  map[string]bool
}

func (x *exporter) raw(b []byte) {
	if x.err == nil {
		_, x.err = x.w.Write(append(append([]byte(nil), b...), '\n'))
	}
}

func (x *exporter) line(t time.Time, typ string, payload any) {
	if !t.IsZero() {
		x.at = t
	}
	b, err := json.Marshal(struct {
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Payload   any    `json:"payload"`
	}{stamp(x.at), typ, payload})
	if err != nil && x.err == nil {
		x.err = err
	}
	x.raw(b)
}

func stamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// learn notes what a source line says that later events need: its calls
// and their outputs, and which calls are custom tool calls.
func (x *exporter) learn(raw json.RawMessage) {
	var l rolloutLine
	var it responseItem
	if json.Unmarshal(raw, &l) == nil && l.Type == kindResponseItem && json.Unmarshal(l.Payload, &it) == nil && it.CallID != "" {
		switch it.Type {
		case "custom_tool_call":
			x.custom[it.CallID] = true
			fallthrough
		case "function_call", "local_shell_call":
			x.requested = append(x.requested, it.CallID)
		case "function_call_output", "custom_tool_call_output":
			x.answered[it.CallID] = true
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
		x.at = t
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ThreadID is the codex thread id of a session: the id it was imported
// with, else a UUID derived from the session id (codex resumes by UUID).
func ThreadID(sessionID string) string {
	if id, ok := strings.CutPrefix(sessionID, Name+"-"); ok && uuidRE.MatchString(id) {
		return id
	}
	h := sha256.Sum256([]byte(sessionID))
	h[6] = h[6]&0x0f | 0x80 // version 8: custom
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func (x *exporter) meta(ex *agentlog.Export) {
	var t time.Time
	if len(ex.Events) > 0 {
		t = ex.Events[0].Time
	}
	m := sessionMeta{ID: ThreadID(ex.SessionID), Timestamp: stamp(t), Cwd: ex.Meta.Labels[agentlog.LabelCwd],
		Originator: "sessionlog", CLIVersion: ex.Meta.Labels[agentlog.LabelVersion], Source: json.RawMessage(`"cli"`)}
	if b := ex.Meta.Labels[agentlog.LabelGitBranch]; b != "" {
		m.Git = &gitInfo{Branch: b}
	}
	x.line(t, kindSessionMeta, m)
}

type msgItem struct {
	Type    string        `json:"type"`
	Role    string        `json:"role"`
	Content []contentItem `json:"content"`
}

type callItem struct {
	Type      string `json:"type"`
	Status    string `json:"status,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
	Input     string `json:"input,omitempty"`
	CallID    string `json:"call_id"`
}

type outputItem struct {
	Type   string          `json:"type"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

type turnEvent struct {
	Type             string  `json:"type"`
	TurnID           string  `json:"turn_id"`
	LastAgentMessage *string `json:"last_agent_message,omitempty"`
	Reason           string  `json:"reason,omitempty"`
}

type textEvent struct {
	Type    string   `json:"type"`
	Message string   `json:"message"`
	Images  []string `json:"images,omitempty"`
}

// event writes the lines of one mapped event.
func (x *exporter) event(e *schema.Envelope) {
	switch e.Type {
	case schema.TypeTurnStarted:
		x.last = ""
		x.line(e.Time, kindEventMsg, turnEvent{Type: "task_started", TurnID: e.TurnID})
	case schema.TypeMessageUser:
		var m schema.Message
		_ = e.DecodeData(&m)
		text := agentlog.TextOf(m.Content)
		x.line(e.Time, kindResponseItem, msgItem{Type: "message", Role: "user", Content: []contentItem{{Type: "input_text", Text: text}}})
		if !injected(text) {
			x.line(e.Time, kindEventMsg, textEvent{Type: "user_message", Message: text, Images: []string{}})
		}
	case schema.TypeMessageAssistant:
		var m schema.Message
		_ = e.DecodeData(&m)
		if text := agentlog.TextOf(m.Content); text != "" {
			x.last = text
			x.line(e.Time, kindResponseItem, msgItem{Type: "message", Role: "assistant", Content: []contentItem{{Type: "output_text", Text: text}}})
			x.line(e.Time, kindEventMsg, textEvent{Type: "agent_message", Message: text})
		}
	case schema.TypeToolRequested:
		var r schema.ToolRequested
		_ = e.DecodeData(&r)
		x.requested = append(x.requested, e.ToolCallID)
		var s string
		if json.Unmarshal(r.Input, &s) == nil {
			x.custom[e.ToolCallID] = true
			x.line(e.Time, kindResponseItem, callItem{Type: "custom_tool_call", Status: "completed", Name: r.Name, Input: s, CallID: e.ToolCallID})
		} else {
			x.line(e.Time, kindResponseItem, callItem{Type: "function_call", Name: r.Name, Arguments: string(r.Input), CallID: e.ToolCallID})
		}
	case schema.TypeToolResult:
		var r schema.ToolResult
		_ = e.DecodeData(&r)
		x.result(e.Time, e.ToolCallID, r.Status, r.Output, agentlog.TextOf(r.Output))
	case schema.TypeTurnEnded:
		var r schema.Reason
		_ = e.DecodeData(&r)
		if r.Reason == schema.TurnCompleted {
			var last *string
			if x.last != "" {
				last = &x.last
			}
			x.line(e.Time, kindEventMsg, turnEvent{Type: "task_complete", TurnID: e.TurnID, LastAgentMessage: last})
		} else {
			x.line(e.Time, kindEventMsg, turnEvent{Type: "turn_aborted", TurnID: e.TurnID, Reason: "interrupted"})
		}
	}
}

// result writes the output line of a call. codex keeps no error flag in
// its files: a result that is not ok and whose text does not already say
// that its command failed is written as codex's structured shell output
// with exit code 1, which is how the reader knows a failure.
func (x *exporter) result(t time.Time, id, status string, output json.RawMessage, text string) {
	if x.answered[id] {
		return
	}
	x.answered[id] = true
	var out json.RawMessage
	switch status {
	case schema.ToolOK:
		out = output
		if !stringOrItems(out) {
			out = jsonString(text)
		}
	case schema.ToolError:
		out = jsonString(text)
		if _, failed := toolOutput(out); !failed {
			out = failedOutput(text)
		}
	default:
		out = failedOutput(agentlog.RepairNote(status))
	}
	typ := "function_call_output"
	if x.custom[id] {
		typ = "custom_tool_call_output"
	}
	x.line(t, kindResponseItem, outputItem{Type: typ, CallID: id, Output: out})
}

func failedOutput(text string) json.RawMessage {
	s, _ := json.Marshal(struct {
		Output   string `json:"output"`
		Metadata struct {
			ExitCode        int     `json:"exit_code"`
			DurationSeconds float64 `json:"duration_seconds"`
		} `json:"metadata"`
	}{Output: text, Metadata: struct {
		ExitCode        int     `json:"exit_code"`
		DurationSeconds float64 `json:"duration_seconds"`
	}{ExitCode: 1}})
	return jsonString(string(s))
}

// stringOrItems: output codex holds as it is: a string, or a list of its
// own content items (input_text, input_image).
func stringOrItems(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return true
	}
	var items []contentItem
	if len(raw) == 0 || json.Unmarshal(raw, &items) != nil {
		return false
	}
	for _, it := range items {
		if it.Type != "input_text" && it.Type != "input_image" {
			return false
		}
	}
	return true
}
