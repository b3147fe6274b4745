package agentlog

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Export is a session prepared for a format's exporter.
type Export struct {
	SessionID string
	Meta      schema.SessionCreated
	// Lines are the session's source lines of the export's format,
	// verbatim and in order (parts joined). Empty when the session was not
	// imported from that format.
	Lines []json.RawMessage
	// Events are the events after the last source line (all of them when
	// Lines is empty), source/line events left out: what happened to the
	// session that the source file does not say.
	Events []schema.Envelope
	// State is the fold of the whole session.
	State *session.State
	// abandoned holds the seqs of the model-visible events a rewind
	// abandoned (left out of Events).
	abandoned map[uint64]bool
}

// NewExport prepares the events of one session, seq 1 on, for an export
// to format.
func NewExport(format string, events []schema.Envelope) (*Export, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("agentlog: export: no events")
	}
	x := &Export{SessionID: events[0].SessionID, State: session.New(events[0].SessionID)}
	var text []byte // parts of a line over the size limit
	lastLine := -1
	for i := range events {
		e := &events[i]
		if err := x.State.Apply(e); err != nil {
			return nil, fmt.Errorf("agentlog: export %s seq %d: %w", x.SessionID, e.Seq, err)
		}
		if e.Type == schema.TypeSessionCreated {
			_ = e.DecodeData(&x.Meta)
		}
		if e.Type != TypeSourceLine {
			continue
		}
		var d SourceLine
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, fmt.Errorf("agentlog: export %s seq %d: source/line: %w", x.SessionID, e.Seq, err)
		}
		if d.Format != format {
			continue
		}
		lastLine = i
		if d.Parts == 0 {
			x.Lines = append(x.Lines, d.Line)
			continue
		}
		if d.Part == 1 {
			text = text[:0]
		}
		text = append(text, d.Text...)
		if d.Part == d.Parts {
			x.Lines = append(x.Lines, json.RawMessage(append([]byte(nil), text...)))
		}
	}
	// A rewind abandons the messages after its point: an export gives
	// the conversation the model continues, without them.
	var kept map[uint64]bool
	if x.State.Rewinds > 0 {
		kept = visible(events, false)
	}
	for i := lastLine + 1; i < len(events); i++ {
		e := &events[i]
		switch {
		case kept != nil && (modelVisible(e.Type) || e.Type == schema.TypeCompactionEnded) && !kept[e.Seq]:
			if x.abandoned == nil {
				x.abandoned = map[uint64]bool{}
			}
			x.abandoned[e.Seq] = true
		case e.Type != TypeSourceLine:
			x.Events = append(x.Events, *e)
		}
	}
	return x, nil
}

// Unanswered lists the tool calls that have no result at the end of the
// session, in the order they were requested: an export must answer them
// (with an error result saying the outcome is not known). A call a
// rewind abandoned is not among them: the export does not hold it.
func (x *Export) Unanswered() []*session.ToolCall {
	var out []*session.ToolCall
	for _, t := range x.State.Tools {
		if t.Open() && !x.abandoned[t.StartSeq] {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].StartSeq < out[b].StartSeq })
	return out
}

// RepairNote is the text of the error result an export gives a call whose
// outcome sessionlog does not know: repaired (status outcome_unknown or
// not_started) or still open.
func RepairNote(status string) string {
	switch status {
	case schema.ToolNotStarted:
		return "sessionlog: this tool call was never started (the session was repaired: status not_started). Check the state of the world before any retry."
	case schema.ToolOutcomeUnknown:
		return "sessionlog: the outcome of this tool call is unknown (the session was repaired after it started: status outcome_unknown). It may or may not have taken effect: check before any retry."
	}
	return "sessionlog: this tool call has no recorded result; its outcome is unknown. It may or may not have taken effect: check before any retry."
}

// Extended reports whether the export writes something after the source
// lines: true for a session from elsewhere (no lines of the format), and
// for one whose events after its last source line carry a step of the
// conversation that sessionlog recorded (a repair's results and turn end,
// a continuation). An export to the session's own format that is not
// extended is the source lines alone, deep-equal to the file: a call the
// file leaves open stays open, as the agent left it.
func (x *Export) Extended() bool {
	if len(x.Lines) == 0 {
		return true
	}
	for _, e := range x.Events {
		switch e.Type {
		case schema.TypeTurnStarted, schema.TypeTurnEnded, schema.TypeMessageUser, schema.TypeMessageAssistant,
			schema.TypeToolRequested, schema.TypeToolResult, schema.TypeCompactionEnded:
			return true
		}
	}
	return false
}

// KnownTime reports whether t is a time a source or sessionlog gave: not
// zero and not the Unix epoch, which a line without a time may carry.
func KnownTime(t time.Time) bool { return !t.IsZero() && t.Unix() != 0 }

// FirstTime is the first known time of the events (zero when none is):
// the time an exporter gives what comes before it.
func (x *Export) FirstTime() time.Time {
	for _, e := range x.Events {
		if KnownTime(e.Time) {
			return e.Time
		}
	}
	if KnownTime(x.State.LastTime) {
		return x.State.LastTime
	}
	return time.Time{}
}

// Clock gives an exporter's lines their times: an event's own when it is
// known, else the last known one before it (the first known one for what
// comes before any), so no line gets the epoch.
type Clock struct{ At time.Time }

// Tick moves the clock to t when t is known, and returns its time.
func (c *Clock) Tick(t time.Time) time.Time {
	if KnownTime(t) {
		c.At = t
	}
	return c.At
}

// ProviderOf is the model provider of a model name as agentlog maps it
// ("provider/model" for pi) and the session's agent: pi names its own;
// Claude Code's models are Anthropic's; codex's provider is the session's
// LabelModelProvider. "" when the session does not say.
func ProviderOf(model string, meta schema.SessionCreated) (provider, name string) {
	if p, m, ok := strings.Cut(model, "/"); ok && meta.Agent == "pi" {
		return p, m
	}
	switch meta.Agent {
	case "claude-code":
		return "anthropic", model
	case "codex":
		return meta.Labels[LabelModelProvider], model
	}
	return "", model
}

// LabelModelProvider is the model provider a session's source names
// (codex's session_meta.model_provider).
const LabelModelProvider = "modelProvider"

// VisibleEvents are the events of a session (seq 1 on, in order) that
// the model sees now, in the order it reads them: the summary
// (compaction/ended) of the compaction that stands, then the messages,
// tool calls and results after it, without what a rewind abandoned.
func VisibleEvents(events []schema.Envelope) []schema.Envelope {
	bySeq := make(map[uint64]int, len(events))
	for i := range events {
		bySeq[events[i].Seq] = i
	}
	var out []schema.Envelope
	for _, s := range modelContext(events, true).Seqs() {
		out = append(out, events[bySeq[s]])
	}
	return out
}

// visible is the set of seqs the model sees, of the events modelVisible
// says it can see and of the compaction summaries; compact false leaves
// what the compactions replaced in (all but what a rewind abandoned).
func visible(events []schema.Envelope, compact bool) map[uint64]bool {
	seen := map[uint64]bool{}
	for _, s := range modelContext(events, compact).Seqs() {
		seen[s] = true
	}
	return seen
}

// modelContext follows the model's context through events.
func modelContext(events []schema.Envelope, compact bool) *session.Context {
	c := session.NewContext()
	for i := range events {
		e := &events[i]
		switch e.Type {
		case schema.TypeCompactionEnded:
			if !compact {
				c.Add(e.Seq)
				continue
			}
			var d schema.CompactionEnded
			if e.DecodeData(&d) == nil {
				c.Compact(e.Seq, d.ThroughSeq)
			}
		case schema.TypeContextRewound:
			var d schema.ContextRewound
			if e.DecodeData(&d) == nil {
				c.Rewind(e.Seq, d.ToSeq)
			}
		default:
			if modelVisible(e.Type) {
				c.Add(e.Seq)
			}
		}
	}
	return c
}

// modelVisible says which events are part of what the model reads.
func modelVisible(typ string) bool {
	switch typ {
	case schema.TypeMessageUser, schema.TypeMessageAssistant, schema.TypeToolRequested, schema.TypeToolResult:
		return true
	}
	return false
}
