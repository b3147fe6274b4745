package agentlog

import (
	"encoding/json"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// UserMessage is user-role content that is not a prompt: context the agent
// adds to the conversation (codex's environment and instructions, pi's
// branch summaries, extension messages and "!" commands). It is
// message/user in the open turn, or outside any turn; it opens and ends
// none. Before the first prompt it is held back with the source lines, so
// that the prompt still names the session.
func (b *Builder) UserMessage(content json.RawMessage) {
	if !b.step() {
		return
	}
	e := schema.Envelope{Type: schema.TypeMessageUser, TurnID: b.turnID()}
	if b.created {
		b.add(e, schema.Message{Content: content})
		return
	}
	e.Data, _ = json.Marshal(schema.Message{Content: content})
	e.EventID, e.Time = eventID(b.key, b.n), b.known // zero: the releasing line's time
	b.n++
	b.shrink(&e)
	b.held = append(b.held, e)
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

// nextID takes the next event id of the line for an event written later
// (a message whose last line has not come yet).
func (b *Builder) nextID() string {
	id := eventID(b.key, b.n)
	b.n++
	return id
}

// Rewind is a return of the conversation to an earlier point (a prompt
// whose parent is not the conversation's last line, pi's /tree): the
// model's context continues from the last event of the line whose key is
// key (its events as a whole: a message finished after the line counts;
// a key not met: from the start, session/created). The open turn ends
// first (interrupted, or completed after a complete reply) when it can:
// what was abandoned is not the turn that follows. It is
// context/rewound; the abandoned events stay in the log.
func (b *Builder) Rewind(key string) {
	if !b.step() {
		return
	}
	b.ensureCreated()
	to, ok := b.lineEnds[lineKey(key, 0)]
	if key == "" || !ok {
		to = lineEnd{1, "created"}
	}
	if b.st.Turn != nil {
		b.interruptTurn(b.replied)
	}
	b.add(schema.Envelope{Type: schema.TypeContextRewound}, schema.ContextRewound{ToEventID: to.id, ToSeq: to.seq})
}

// lineEnd is the last event of a line's mapping so far.
type lineEnd struct {
	seq uint64
	id  string
}
