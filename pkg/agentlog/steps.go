package agentlog

import (
	"encoding/json"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// UserMessage is user-role content that is not a prompt: context the agent
// adds to the conversation (codex's environment and instructions, pi's
// branch summaries, extension messages and "!" commands). It is
// message/user in the open turn, or outside any turn; it opens and ends
// none.
func (b *Builder) UserMessage(content json.RawMessage) {
	if !b.step() {
		return
	}
	b.ensureCreated()
	b.add(schema.Envelope{Type: schema.TypeMessageUser, TurnID: b.turnID()}, schema.Message{Content: content})
}

// CompactionThrough is a compaction whose summary replaces only the events
// through seq through (clamped to the events so far): what follows stays
// visible to the model, as pi keeps the entries from firstKeptEntryId on.
func (b *Builder) CompactionThrough(through uint64, summary string) {
	if !b.step() {
		return
	}
	b.ensureCreated()
	if b.compact != "" {
		b.Skip("compaction already open")
		return
	}
	if through < 1 || through > b.st.LastSeq {
		through = b.st.LastSeq
	}
	if summary == "" {
		summary = "(empty summary)"
	}
	id := "c." + b.key
	b.add(schema.Envelope{Type: schema.TypeCompactionStarted}, schema.CompactionStarted{CompactionID: id, ThroughSeq: through})
	b.add(schema.Envelope{Type: schema.TypeCompactionEnded}, schema.CompactionEnded{CompactionID: id, Summary: summary, ThroughSeq: through})
}
