package codex

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// exporter writes a rollout file from a session's mapped events.
type exporter struct {
	w     *bufio.Writer
	err   error
	turn  string
	calls map[string]bool   // open call id -> custom tool call
	order []string          // open call ids in request order
	last  string            // text of the last assistant message of the turn
	at    time.Time         // time of the last event written
}

func (x *exporter) line(t time.Time, typ string, payload any) {
	if x.err != nil {
		return
	}
	x.at = t
	b, err := json.Marshal(struct {
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Payload   any    `json:"payload"`
	}{stamp(t), typ, payload})
	if err != nil {
		x.err = err
		return
	}
	b = append(b, '\n')
	_, x.err = x.w.Write(b)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
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
	Type         string   `json:"type"`
	Message      string   `json:"message"`
	Images       []string `json:"images,omitempty"`
	LocalImages  []string `json:"local_images,omitempty"`
	TextElements []string `json:"text_elements,omitempty"`
}

// event writes the lines of one mapped event.
func (x *exporter) event(e *schema.Envelope) {
	switch e.Type {
	case schema.TypeTurnStarted:
		x.turn, x.last = e.TurnID, ""
		x.line(e.Time, kindEventMsg, turnEvent{Type: "task_started", TurnID: e.TurnID})
	case schema.TypeMessageUser:
		var m schema.Message
		_ = e.DecodeData(&m)
		text := contentText(m.Content)
		x.line(e.Time, kindResponseItem, msgItem{Type: "message", Role: "user", Content: []contentItem{{Type: "input_text", Text: text}}})
		if !injected(text) {
			x.line(e.Time, kindEventMsg, textEvent{Type: "user_message", Message: text, Images: []string{}, LocalImages: []string{}, TextElements: []string{}})
		}
	case schema.TypeMessageAssistant:
		var m schema.Message
		_ = e.DecodeData(&m)
		text := contentText(m.Content)
		x.last = text
		x.line(e.Time, kindResponseItem, msgItem{Type: "message", Role: "assistant", Content: []contentItem{{Type: "output_text", Text: text}}})
		x.line(e.Time, kindEventMsg, textEvent{Type: "agent_message", Message: text})
	case schema.TypeToolRequested:
		var r schema.ToolRequested
		_ = e.DecodeData(&r)
		var s string
		custom := json.Unmarshal(r.Input, &s) == nil
		it := callItem{Type: "function_call", Name: r.Name, Arguments: string(r.Input), CallID: e.ToolCallID}
		if custom {
			it = callItem{Type: "custom_tool_call", Status: "completed", Name: r.Name, Input: s, CallID: e.ToolCallID}
		}
		x.calls[e.ToolCallID] = custom
		x.order = append(x.order, e.ToolCallID)
		x.line(e.Time, kindResponseItem, it)
	case schema.TypeToolResult:
		var r schema.ToolResult
		_ = e.DecodeData(&r)
		x.result(e.Time, e.ToolCallID, r.Status, r.Output)
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
		x.turn = ""
	case schema.TypeCompactionEnded:
		var c schema.CompactionEnded
		_ = e.DecodeData(&c)
		x.line(e.Time, kindCompacted, compactedItem{Message: c.Summary})
	}
}

// result writes the output line of a call. codex keeps no error flag in its
// files: a result that is not ok and whose text does not already say its
// command failed is written as codex's structured shell output with exit
// code 1, which is how the reader recognises a failure.
func (x *exporter) result(t time.Time, id, status string, output json.RawMessage) {
	custom, ok := x.calls[id]
	if !ok {
		return // a result of a call this file never requested
	}
	delete(x.calls, id)
	text := contentText(output)
	if status == schema.ToolNotStarted || status == schema.ToolOutcomeUnknown {
		text = unansweredText(status, text)
	}
	var out json.RawMessage
	if status == schema.ToolOK {
		out = output
		if len(out) == 0 || !isStringOrItems(out) {
			out, _ = json.Marshal(text)
		}
	} else {
		if _, failed := toolOutput(mustString(text)); failed {
			out = mustString(text)
		} else {
			s, _ := json.Marshal(map[string]any{"output": text, "metadata": map[string]any{"exit_code": 1, "duration_seconds": 0}})
			out = mustString(string(s))
		}
	}
	typ := "function_call_output"
	if custom {
		typ = "custom_tool_call_output"
	}
	x.line(t, kindResponseItem, outputItem{Type: typ, CallID: id, Output: out})
}

func mustString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// isStringOrItems: output codex can hold as it is (a string, or a list of
// content items).
func isStringOrItems(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return true
	}
	var items []contentItem
	return json.Unmarshal(raw, &items) == nil
}

// contentText is the text of message content or tool output: a string as
// it is, the text parts of a list of blocks, or the JSON itself.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Text != "" {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return string(raw)
}

func unansweredText(status, output string) string {
	return "" // replaced by the core's text
}

var _ = io.Discard
