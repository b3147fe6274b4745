package codex

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Export writes x as a rollout file: the source lines as they are, then
// the events that follow them (all events for a session from elsewhere),
// then an error result for every call still without one, unless nothing
// follows the source lines (agentlog.Export.Extended): the file as it was.
// It reads the session as it writes, holding the calls still open and
// where the compactions go.
func (Format) Export(w io.Writer, x *agentlog.Export) error {
	bw := bufio.NewWriter(w)
	ex := &exporter{w: bw, custom: map[string]bool{}}
	ex.clock.At = x.FirstTime()
	err := x.EachLine(func(l json.RawMessage) error {
		ex.raw(l)
		ex.learn(l)
		return ex.err
	})
	if err != nil {
		return err
	}
	extended := x.Extended()
	// A call of the file's last model response was never complete in
	// sessionlog: it is answered before what happened after the file (and
	// only then: a result of it after the file is not written again).
	if extended {
		for _, c := range ex.requested.List() {
			if x.State.Tools[agentlog.ItemID(c.ID)] == nil {
				ex.result(time.Time{}, c.ID, "", nil, "")
				if ex.early == nil {
					ex.early = map[string]bool{}
				}
				ex.early[c.ID] = true
			}
		}
	}
	if x.Lines == 0 {
		ex.meta(x)
	}
	// codex's compacted replaces everything before it, so a compaction
	// is written before the first event after the last one it replaces:
	// what the model sees after it is the same. Its summary is read when
	// it is written (it may come later in the session).
	compactions := slices.Clone(x.Compactions())
	sort.SliceStable(compactions, func(a, b int) bool { return compactions[a].ThroughSeq < compactions[b].ThroughSeq })
	compacted := func(at time.Time, c agentlog.Compaction) error {
		e, err := x.Event(c.Seq)
		if err != nil {
			return err
		}
		var d schema.CompactionEnded
		_ = e.DecodeData(&d)
		ex.line(at, kindCompacted, compactedItem{Message: d.Summary})
		return nil
	}
	err = x.EachEvent(func(e *schema.Envelope) error {
		if e.Type != schema.TypeToolRequested && e.Type != schema.TypeToolStarted {
			ex.endResponse(x.Meta)
		}
		for len(compactions) > 0 && compactions[0].ThroughSeq < e.Seq {
			if err := compacted(e.Time, compactions[0]); err != nil {
				return err
			}
			compactions = compactions[1:]
		}
		ex.event(e)
		return ex.err
	})
	if err != nil {
		return err
	}
	ex.endResponse(x.Meta)
	for _, c := range compactions {
		if err := compacted(time.Time{}, c); err != nil {
			return err
		}
	}
	// Every call is answered once: those still open get an error result
	// saying the outcome is unknown.
	if extended {
		for _, c := range ex.requested.List() {
			ex.result(time.Time{}, c.ID, "", nil, "")
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
	custom map[string]bool // open call id -> requested as a custom tool call
	last   string          // text of the turn's last assistant message
	clock  agentlog.Clock  // the time of the lines
	// requested: the calls without an output, in the order of their
	// requests; early: those answered before the events after the file.
	requested agentlog.OpenCalls
	early     map[string]bool
	// the model response being written (its message and calls), ended by
	// a token_count line; usage is its message's
	open  bool
	usage json.RawMessage
	total agentlog.Tokens
}

// endResponse ends the model response written last with a token_count
// line, as codex does: the reader takes the response's items up to it as
// one message (two messages in a row stay two), with its usage in codex's
// shape (a codex session's as it is).
func (x *exporter) endResponse(meta schema.SessionCreated) {
	if !x.open {
		return
	}
	x.open = false
	usage := x.usage
	x.usage = nil
	t, ok := agentlog.UsageTokens(usage)
	if !ok {
		x.line(time.Time{}, kindEventMsg, map[string]any{"type": "token_count", "info": nil, "rate_limits": nil})
		return
	}
	x.total = agentlog.Tokens{Input: x.total.Input + t.Input, Output: x.total.Output + t.Output, CacheRead: x.total.CacheRead + t.CacheRead}
	last := usage
	if meta.Agent != Name {
		last = codexUsage(t)
	}
	x.line(time.Time{}, kindEventMsg, map[string]any{"type": "token_count", "rate_limits": nil,
		"info": map[string]any{"total_token_usage": codexUsage(x.total), "last_token_usage": last, "model_context_window": nil}})
}

// codexUsage is t as codex counts it: input_tokens counts the cached ones.
func codexUsage(t agentlog.Tokens) json.RawMessage {
	b, _ := json.Marshal(map[string]int64{"input_tokens": t.Input + t.CacheRead + t.CacheWrite, "cached_input_tokens": t.CacheRead,
		"output_tokens": t.Output, "reasoning_output_tokens": 0, "total_tokens": t.Input + t.CacheRead + t.CacheWrite + t.Output})
	return b
}

func (x *exporter) raw(b []byte) {
	if x.err == nil {
		_, x.err = x.w.Write(append(append([]byte(nil), b...), '\n'))
	}
}

// line writes a rollout line at t (or the last known time before it).
func (x *exporter) line(t time.Time, typ string, payload any) {
	b, err := json.Marshal(struct {
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Payload   any    `json:"payload"`
	}{stamp(x.clock.Tick(t)), typ, payload})
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
			x.requested.Request(it.CallID)
		case "function_call_output", "custom_tool_call_output":
			x.requested.Answer(it.CallID)
			delete(x.custom, it.CallID)
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
		x.clock.Tick(t)
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

// meta writes the session_meta of a session from elsewhere: written by
// sessionlog (originator), so cli_version (which codex requires) is a
// codex version only when the session came from codex, else empty, and
// so is model_provider (codex lists a thread under its provider: another
// agent's provider name is not one of codex's).
func (x *exporter) meta(ex *agentlog.Export) {
	m := sessionMeta{ID: ThreadID(ex.SessionID), Timestamp: stamp(x.clock.At), Cwd: ex.Meta.Labels[agentlog.LabelCwd],
		Originator: "sessionlog", Source: json.RawMessage(`"cli"`)}
	if ex.Meta.Agent == Name {
		m.CLIVersion = ex.Meta.Labels[agentlog.LabelVersion]
		m.ModelProvider = ex.Meta.Labels[agentlog.LabelModelProvider]
	}
	if b := ex.Meta.Labels[agentlog.LabelGitBranch]; b != "" {
		m.Git = &gitInfo{Branch: b}
	}
	x.line(time.Time{}, kindSessionMeta, m)
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
		x.usage = m.Usage
		if text := agentlog.TextOf(m.Content); text != "" {
			x.last, x.open = text, true
			x.line(e.Time, kindResponseItem, msgItem{Type: "message", Role: "assistant", Content: []contentItem{{Type: "output_text", Text: text}}})
			x.line(e.Time, kindEventMsg, textEvent{Type: "agent_message", Message: text})
		}
	case schema.TypeToolRequested:
		var r schema.ToolRequested
		_ = e.DecodeData(&r)
		x.requested.Request(e.ToolCallID)
		x.open = true
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
	if x.early[id] {
		return
	}
	x.requested.Answer(id)
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
	delete(x.custom, id)
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
