package agentlogtest

import "github.com/sessionlog/sessionlog/pkg/schema"

// lastCompaction is the throughSeq and summary of the last ended
// compaction of events (0 and "" when there is none).
func lastCompaction(events []schema.Envelope) (through uint64, summary string) {
	for _, e := range events {
		if e.Type == schema.TypeCompactionEnded {
			var c schema.CompactionEnded
			_ = e.DecodeData(&c)
			through, summary = c.ThroughSeq, c.Summary
		}
	}
	return through, summary
}

// Steps is the model-visible conversation of a session (as Context) by
// kind and call id, the shape an agent's own reader of its file is held
// against: "summary", then per message "user" or "assistant" (every
// assistant message, empty or not), "call <id>" per tool call and
// "result <id>" per result.
func Steps(events []schema.Envelope) []string {
	through, summary := lastCompaction(events)
	var out []string
	if summary != "" {
		out = append(out, "summary")
	}
	for _, e := range events {
		if e.Seq <= through {
			continue
		}
		switch e.Type {
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
