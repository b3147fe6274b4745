package pi

import (
	"encoding/json"
)

// steps is what the reader needs of the core builder (adapted on merge).
type steps interface {
	Prompt(content json.RawMessage)
	UserMessage(content json.RawMessage)
	Assistant(model string, content json.RawMessage, usage json.RawMessage)
	ToolCall(callID, name string, input json.RawMessage)
	ToolResult(callID string, failed bool, output json.RawMessage)
	TurnEnd(reason string)
	Compaction(summary string, keepFrom string)
	TurnOpen() bool
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// mapEntry maps one tree entry; it reports false for an entry it skips.
func mapEntry(b steps, e *entry) bool {
	switch e.Type {
	case typeMessage:
		if e.Message == nil {
			return false
		}
		return mapMessage(b, e.Message)
	case typeCustomMessage:
		b.UserMessage(jsonString(text(e.Content)))
	case typeBranchSummary:
		if e.Summary == "" {
			return false
		}
		b.UserMessage(jsonString(branchSummaryPrefix + e.Summary + branchSummarySuffix))
	case typeCompaction:
		b.Compaction(e.Summary, e.FirstKeptEntryID)
	default:
		return false
	}
	return true
}

func mapMessage(b steps, m *message) bool {
	switch m.Role {
	case roleUser:
		if b.TurnOpen() {
			b.TurnEnd("interrupted")
		}
		b.Prompt(jsonString(text(m.Content)))
	case roleAssistant:
		if !b.TurnOpen() {
			return false
		}
		model := m.Model
		if m.Provider != "" && m.Model != "" {
			model = m.Provider + "/" + m.Model
		}
		b.Assistant(model, jsonString(text(m.Content)), m.Usage)
		calls := 0
		for _, bl := range blocks(m.Content) {
			if bl.Type != "toolCall" || bl.ID == "" {
				continue
			}
			in := bl.Arguments
			if len(in) == 0 || string(in) == "null" {
				in = json.RawMessage("{}")
			}
			b.ToolCall(bl.ID, bl.Name, in)
			calls++
		}
		switch {
		case calls > 0:
		case m.StopReason == "aborted" || m.StopReason == "error":
			b.TurnEnd("interrupted")
		default:
			b.TurnEnd("completed")
		}
	case roleToolResult:
		b.ToolResult(m.ToolCallID, m.IsError, jsonString(text(m.Content)))
	case roleBashExecution:
		if m.ExcludeFromContext {
			return false
		}
		b.UserMessage(jsonString(bashExecutionText(m)))
	case roleCustom:
		b.UserMessage(jsonString(text(m.Content)))
	default:
		return false
	}
	return true
}
