package agentlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Events reads the events of one session in seq order: it calls fn for
// each event after seq after, up to the session's end as the read finds
// it, and returns fn's first error (ErrStop ends the read with none). The
// envelope is fn's only for the call. An export reads the session more
// than once: it must be re-readable.
type Events func(after uint64, fn func(*schema.Envelope) error) error

// ErrStop, returned by the fn of an Events read, ends the read early
// without an error.
var ErrStop = errors.New("agentlog: stop reading")

// SliceEvents are events held in memory, seq 1 on, as Events.
func SliceEvents(events []schema.Envelope) Events {
	return func(after uint64, fn func(*schema.Envelope) error) error {
		i := 0
		if after > 0 {
			i = sort.Search(len(events), func(i int) bool { return events[i].Seq > after })
		}
		for ; i < len(events); i++ {
			if err := fn(&events[i]); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
		return nil
	}
}

// Export is a session prepared for a format's exporter, which reads it
// from its Events as it writes: its source lines of the export's format
// (EachLine), then the events after the last of them (EachEvent). What an
// exporter must know before it writes (the fold of the whole session,
// where the source lines end, what the rewinds abandoned, whether
// anything follows the lines) comes from a first read, so an export holds
// the fold, one event and a line at a time, never the session.
type Export struct {
	SessionID string
	Meta      schema.SessionCreated
	// State is the fold of the whole session, as a reader folds it
	// (session.NewReader: what is open and the last ended turn's items,
	// nothing of the turns before).
	State *session.State
	// Lines counts the session's source lines of the export's format
	// (parts joined): none when the session was not imported from it.
	Lines int
	// After counts the events an Events read gave (what happened after
	// the source lines).
	After int

	events Events
	format string
	// last is the session's last seq when it was first read: the reads
	// after it stop there. lastLine is the seq of the last source/line of
	// the format (0: none).
	last, lastLine uint64
	// abandoned are the ranges of seqs the rewinds that stand at the end
	// took out of the model's context (at most one a rewind: NewExport
	// holds a range of each rewind).
	abandoned []SeqRange
	// compactions are the compaction/ended events after the last line
	// that no rewind abandoned, in seq order.
	compactions []Compaction
	extended    bool
	firstTime   time.Time
}

// SeqRange is the open range (After, Before) of the seqs a
// context/rewound at seq Before abandoned: it took the model's context
// back to what it was right after the event at seq After.
type SeqRange struct{ After, Before uint64 }

// Compaction is where a compaction/ended stands: its seq and the seq of
// the last event it replaces.
type Compaction struct{ Seq, ThroughSeq uint64 }

// NewExport reads the session of events (seq 1 on) once, for an export to
// format: its fold, where its source lines of format end and what follows
// them. It holds the fold, the ranges its rewinds abandoned and the
// compactions after the source lines, none of its events.
func NewExport(format string, events Events) (*Export, error) {
	x := &Export{events: events, format: format}
	var (
		firstKnown *schema.Envelope // the first event after the last line with a known time
		known      schema.Envelope  // its copy (type, seq, time)
		fixed      bool             // a turn began or ended after the last line
		maybe      int              // messages, calls, results, compactions after it
		all        []Compaction     // compaction/ended after the last line
		rewinds    []SeqRange       // what each rewind abandoned
	)
	err := events(0, func(e *schema.Envelope) error {
		if x.State == nil {
			x.SessionID = e.SessionID
			x.State = session.NewReader(e.SessionID)
		}
		if err := x.State.Apply(e); err != nil {
			return fmt.Errorf("agentlog: export %s seq %d: %w", x.SessionID, e.Seq, err)
		}
		x.last = e.Seq
		switch e.Type {
		case schema.TypeSessionCreated:
			_ = e.DecodeData(&x.Meta)
		case TypeSourceLine:
			var d SourceLine
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return fmt.Errorf("agentlog: export %s seq %d: source/line: %w", x.SessionID, e.Seq, err)
			}
			if d.Format != format {
				return nil
			}
			x.lastLine = e.Seq
			firstKnown, fixed, maybe, all = nil, false, 0, all[:0]
			if d.Parts == 0 || d.Part == d.Parts {
				x.Lines++
			}
			return nil
		case schema.TypeContextRewound:
			var d schema.ContextRewound
			if e.DecodeData(&d) == nil && d.ToSeq < e.Seq {
				rewinds = append(rewinds, SeqRange{After: d.ToSeq, Before: e.Seq})
			}
		case schema.TypeCompactionEnded:
			var d schema.CompactionEnded
			_ = e.DecodeData(&d)
			all = append(all, Compaction{Seq: e.Seq, ThroughSeq: d.ThroughSeq})
		}
		if firstKnown == nil && KnownTime(e.Time) {
			known = schema.Envelope{Seq: e.Seq, Type: e.Type, Time: e.Time}
			firstKnown = &known
		}
		switch {
		case e.Type == schema.TypeTurnStarted || e.Type == schema.TypeTurnEnded:
			fixed = true
		case extending(e.Type):
			maybe++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if x.State == nil {
		return nil, fmt.Errorf("agentlog: export: no events")
	}
	x.abandoned = standing(rewinds)
	for _, c := range all {
		if !x.Abandoned(c.Seq) {
			x.compactions = append(x.compactions, c)
		}
	}
	// Whether something follows the lines, and the first time after them:
	// known from the read unless what it found was abandoned, then looked
	// for again from the last line on (stopping at the first).
	x.extended = x.Lines == 0 || fixed || maybe > 0 && len(x.abandoned) == 0
	if !x.extended && maybe > 0 {
		err := x.scan(func(e *schema.Envelope) bool {
			x.extended = extending(e.Type)
			return x.extended
		})
		if err != nil {
			return nil, err
		}
	}
	switch {
	case firstKnown == nil:
	case !x.abandonable(firstKnown.Type) || !x.Abandoned(firstKnown.Seq):
		x.firstTime = firstKnown.Time
	default:
		err := x.scan(func(e *schema.Envelope) bool {
			if KnownTime(e.Time) {
				x.firstTime = e.Time
				return true
			}
			return false
		})
		if err != nil {
			return nil, err
		}
	}
	return x, nil
}

// SourceLines are the source lines of format of the session of events
// (seq 1 on), verbatim and in order (parts joined).
func SourceLines(format string, events []schema.Envelope) ([]json.RawMessage, error) {
	var out []json.RawMessage
	last, err := EachSourceLine(format, SliceEvents(events), func(l json.RawMessage) error {
		out = append(out, append(json.RawMessage(nil), l...))
		return nil
	})
	if err == nil && last == 0 {
		err = fmt.Errorf("agentlog: export: no events")
	}
	return out, err
}

// EachSourceLine reads the session of events (seq 1 on) once, folding it
// as a reader (session.NewReader), and calls fn with each of its source
// lines of format, verbatim and in order (parts joined; the line is fn's
// for the call only): what SourceLines gives, holding a line at a time
// and what is open of the fold. last is the session's last seq (0: it
// has no events). A session that does not fold is an error, after the
// lines before the event that does not fit.
func EachSourceLine(format string, events Events, fn func(json.RawMessage) error) (last uint64, err error) {
	var (
		st    *session.State
		parts lineParts
	)
	err = events(0, func(e *schema.Envelope) error {
		if st == nil {
			st = session.NewReader(e.SessionID)
		}
		if err := st.Apply(e); err != nil {
			return fmt.Errorf("agentlog: export %s seq %d: %w", st.SessionID, e.Seq, err)
		}
		last = e.Seq
		if e.Type != TypeSourceLine {
			return nil
		}
		l, ok, err := parts.add(e, format)
		if err != nil || !ok {
			return err
		}
		return fn(l)
	})
	return last, err
}

// lineParts puts the source lines of a format together from their
// source/line events, a line kept in parts (over the size limit) from
// its parts.
type lineParts struct{ text []byte }

// add takes a source/line event: ok when it ends a line of format, which
// is then line (the lineParts' until the next add).
func (p *lineParts) add(e *schema.Envelope, format string) (line json.RawMessage, ok bool, err error) {
	var d SourceLine
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil, false, fmt.Errorf("agentlog: export %s seq %d: source/line: %w", e.SessionID, e.Seq, err)
	}
	switch {
	case d.Format != format:
		return nil, false, nil
	case d.Parts == 0:
		return d.Line, true, nil
	case d.Part == 1:
		p.text = p.text[:0]
	}
	p.text = append(p.text, d.Text...)
	return p.text, d.Part == d.Parts, nil
}

// standing are the ranges of the rewinds (each the range it abandoned, in
// seq order) that stand at the end, in seq order: read backwards from the
// last, a rewind sends the context back to what it was after its toSeq,
// over everything in between, earlier rewinds there included; what comes
// before its toSeq is as the rewinds before it left it.
func standing(rewinds []SeqRange) []SeqRange {
	var out []SeqRange
	for i := len(rewinds) - 1; i >= 0; i-- {
		if n := len(out); n > 0 && rewinds[i].Before > out[n-1].After {
			continue
		}
		out = append(out, rewinds[i])
	}
	slices.Reverse(out)
	return out
}

// extending: an event of this type after the source lines is a step of the
// conversation (Extended) that a rewind can abandon.
func extending(typ string) bool {
	switch typ {
	case schema.TypeMessageUser, schema.TypeMessageAssistant, schema.TypeToolRequested, schema.TypeToolResult, schema.TypeCompactionEnded:
		return true
	}
	return false
}

// abandonable: an event of this type leaves the export when a rewind
// abandons it.
func (x *Export) abandonable(typ string) bool {
	return len(x.abandoned) > 0 && (modelVisible(typ) || typ == schema.TypeCompactionEnded)
}

// Abandoned reports whether a rewind that stands abandoned the seq, after
// the source lines (a line, and what it maps to, stays as the source has
// it).
func (x *Export) Abandoned(seq uint64) bool {
	if seq <= x.lastLine {
		return false
	}
	i := sort.Search(len(x.abandoned), func(i int) bool { return x.abandoned[i].Before > seq })
	return i < len(x.abandoned) && seq > x.abandoned[i].After
}

// scan reads the events after the source lines (as EachEvent) until fn
// says it found what it looked for.
func (x *Export) scan(fn func(*schema.Envelope) bool) error {
	return x.eachEvent(func(e *schema.Envelope) error {
		if fn(e) {
			return ErrStop
		}
		return nil
	})
}

// read reads the session after seq after up to its last seq at the first
// read, and fails when it ends before upTo.
func (x *Export) read(after, upTo uint64, fn func(*schema.Envelope) error) error {
	at, stopped := after, false
	err := x.events(after, func(e *schema.Envelope) error {
		if e.Seq > x.last {
			stopped = true
			return ErrStop
		}
		at = e.Seq
		if err := fn(e); err != nil {
			stopped = errors.Is(err, ErrStop)
			return err
		}
		if e.Seq >= upTo {
			stopped = true
			return ErrStop
		}
		return nil
	})
	if errors.Is(err, ErrStop) {
		err = nil
	}
	if err == nil && !stopped && at < upTo {
		return fmt.Errorf("agentlog: export %s: the session's read ended at seq %d, before seq %d", x.SessionID, at, upTo)
	}
	return err
}

// EachLine calls fn with each source line of the format, verbatim and in
// order (parts joined; the line is fn's for the call only), reading the
// session up to the last one. ErrStop from fn ends the read early.
func (x *Export) EachLine(fn func(json.RawMessage) error) error {
	if x.lastLine == 0 {
		return nil
	}
	var parts lineParts
	err := x.read(0, x.lastLine, func(e *schema.Envelope) error {
		if e.Type != TypeSourceLine {
			return nil
		}
		l, ok, err := parts.add(e, x.format)
		if err != nil || !ok {
			return err
		}
		return fn(l)
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// EachEvent calls fn with each event after the last source line, in
// order, up to the session's last seq at the first read: what happened
// to the session that the source file does not say (all events when it
// has no lines of the format). source/line events are left out, and so
// are the model-visible ones a rewind abandoned: an export gives the
// conversation the model continues. It counts them in After.
func (x *Export) EachEvent(fn func(*schema.Envelope) error) error {
	x.After = 0
	err := x.eachEvent(func(e *schema.Envelope) error {
		x.After++
		return fn(e)
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

func (x *Export) eachEvent(fn func(*schema.Envelope) error) error {
	if x.last <= x.lastLine {
		return nil
	}
	return x.read(x.lastLine, x.last, func(e *schema.Envelope) error {
		if e.Type == TypeSourceLine || x.abandonable(e.Type) && x.Abandoned(e.Seq) {
			return nil
		}
		return fn(e)
	})
}

// Event reads the event at seq.
func (x *Export) Event(seq uint64) (schema.Envelope, error) {
	var out schema.Envelope
	err := x.read(seq-1, seq, func(e *schema.Envelope) error {
		if e.Seq == seq {
			out = *e
			out.Data = append(json.RawMessage(nil), e.Data...)
		}
		return nil
	})
	if err == nil && out.Seq != seq {
		err = fmt.Errorf("agentlog: export %s: no event at seq %d", x.SessionID, seq)
	}
	return out, err
}

// Compactions are the compaction/ended events after the source lines that
// no rewind abandoned, in seq order (what EachEvent gives of them).
func (x *Export) Compactions() []Compaction { return x.compactions }

// Unanswered lists the tool calls that have no result at the end of the
// session, in the order they were requested: an export must answer them
// (with an error result saying the outcome is not known). A call a
// rewind abandoned is not among them: the export does not hold it.
func (x *Export) Unanswered() []*session.ToolCall {
	var out []*session.ToolCall
	for _, t := range x.State.Tools {
		if t.Open() && !x.Abandoned(t.StartSeq) {
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
func (x *Export) Extended() bool { return x.extended }

// KnownTime reports whether t is a time a source or sessionlog gave: not
// zero and not the Unix epoch, which a line without a time may carry.
func KnownTime(t time.Time) bool { return !t.IsZero() && t.Unix() != 0 }

// FirstTime is the first known time of the events (zero when none is):
// the time an exporter gives what comes before it.
func (x *Export) FirstTime() time.Time {
	if !x.firstTime.IsZero() {
		return x.firstTime
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
