package agentlogtest

import (
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Steps is the model-visible conversation of a session (as Context: after
// the compaction that stands, without what a rewind abandoned) by kind and
// call id, the shape an agent's own reader of its file is held against:
// "summary", then per message "user" or "assistant" (every assistant
// message, empty or not), "call <id>" per tool call and "result <id>" per
// result.
func Steps(events []schema.Envelope) []string {
	var out []string
	for _, e := range agentlog.VisibleEvents(events) {
		switch e.Type {
		case schema.TypeCompactionEnded:
			out = append(out, "summary")
		case schema.TypeMessageUser:
			out = append(out, "user")
		case schema.TypeMessageAssistant:
			out = append(out, "assistant")
		case schema.TypeToolRequested:
			out = append(out, "call "+e.ToolCallID)
		case schema.TypeToolResult:
			out = append(out, "result "+e.ToolCallID)
		}
	}
	return out
}
