package codex

import (
	"encoding/json"
	"strings"
)

// steps is what the reader needs of the core builder (adapted on merge).
type steps interface {
	Prompt(turnID string, content json.RawMessage)
	UserMessage(content json.RawMessage)
	Assistant(model string, content json.RawMessage, usage json.RawMessage)
	ToolCall(callID, name string, input json.RawMessage)
	ToolResult(callID string, failed bool, output json.RawMessage)
	TurnEnd(reason string)
	Compaction(summary string)
	TurnOpen() bool
}

// mapper turns the lines of one rollout file into builder steps.
type mapper struct {
	b       steps
	model   string // of the last turn_context
	turnID  string // of the last task_started, until a prompt uses it
	byTask  bool   // the open turn was opened after a task_started
	replied bool   // an assistant message began the current model response
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// item maps one response_item; it reports false for an item it skips.
func (m *mapper) item(it *responseItem) bool {
	switch it.Type {
	case "message":
		text := messageText(it.Content)
		switch {
		case it.Role == "assistant":
			m.b.Assistant(m.model, jsonString(text), nil)
			m.replied = true
		case it.Role == "user" && !injected(text):
			if m.b.TurnOpen() && !m.byTask {
				m.b.TurnEnd("interrupted")
			}
			if !m.b.TurnOpen() {
				m.byTask = m.turnID != ""
			}
			m.b.Prompt(m.turnID, jsonString(text))
			m.turnID = ""
			m.replied = false
		case it.Role == "user" || it.Role == "developer" || it.Role == "system":
			m.b.UserMessage(jsonString(text))
			m.replied = false
		default:
			return false
		}
	case "function_call", "custom_tool_call", "local_shell_call":
		if !m.b.TurnOpen() {
			return false
		}
		if !m.replied {
			// A model response of calls only: the attempt replied with no text.
			m.b.Assistant(m.model, jsonString(""), nil)
			m.replied = true
		}
		input := it.Action
		switch it.Type {
		case "function_call":
			input = json.RawMessage(it.Arguments)
			if !json.Valid(input) {
				input = jsonString(it.Arguments)
			}
		case "custom_tool_call":
			input = jsonString(it.Input)
		}
		name := it.Name
		if it.Type == "local_shell_call" {
			name = "local_shell"
		}
		if it.CallID == "" || len(input) == 0 {
			return false
		}
		m.b.ToolCall(it.CallID, name, input)
	case "function_call_output", "custom_tool_call_output":
		out, failed := toolOutput(it.Output)
		m.b.ToolResult(it.CallID, failed, out)
		m.replied = false
	default:
		return false
	}
	return true
}

// event maps one event_msg.
func (m *mapper) event(ev *eventMsg) bool {
	switch ev.Type {
	case "task_started":
		if m.b.TurnOpen() {
			m.b.TurnEnd("interrupted")
		}
		m.turnID, m.byTask = ev.TurnID, false
		if m.turnID == "" {
			m.turnID = "-" // a task_started without id still opens the next turn by task
		}
	case "task_complete":
		if !m.b.TurnOpen() {
			return false
		}
		m.b.TurnEnd("completed")
	case "turn_aborted":
		if !m.b.TurnOpen() {
			return false
		}
		m.b.TurnEnd("interrupted")
	default:
		return false
	}
	return true
}

// compacted maps a compacted line.
func (m *mapper) compacted(c *compactedItem) {
	summary := c.Message
	if strings.TrimSpace(summary) == "" {
		var parts []string
		for _, raw := range c.ReplacementHistory {
			var it responseItem
			if json.Unmarshal(raw, &it) == nil && it.Type == "message" {
				parts = append(parts, messageText(it.Content))
			}
		}
		summary = strings.Join(parts, "\n")
	}
	m.b.Compaction(summary)
}
