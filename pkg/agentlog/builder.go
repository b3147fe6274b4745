package agentlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// TypeSourceLine is the ignorable event that keeps a source line verbatim.
const TypeSourceLine = "source/line"

// SourceLine is the data of a source/line event: Line (the line's JSON
// value) or, for a line over the event size limit, Part/Parts/Text (the
// line's text in consecutive events, Part counting from 1).
type SourceLine struct {
	Format string          `json:"format"`
	Index  int             `json:"index"`
	Line   json.RawMessage `json:"line,omitempty"`
	Part   int             `json:"part,omitempty"`
	Parts  int             `json:"parts,omitempty"`
	Text   string          `json:"text,omitempty"`
}

// ToolCall is one tool call of an assistant message.
type ToolCall struct {
	ID    string          // the source's call id
	Name  string          // tool name
	Input json.RawMessage // its arguments (a JSON value)
}

// Assistant is one line of an assistant message. Lines with the same ID
// are one message, one attempt; the message is complete when a line says
// Stop, or when any other step comes.
type Assistant struct {
	ID      string            // message id; "" = the line is the whole message
	Model   string            // model name, when known
	Content []json.RawMessage // content blocks other than tool calls
	Calls   []ToolCall
	Usage   json.RawMessage // usage of the message (the last one given wins)
	// Stop is the stop reason when this line ends the message: "end_turn"
	// (or any non-empty reason but "tool_use") ends the turn as completed
	// when no call is open.
	Stop string
}

// Meta is what session/created says of a session.
type Meta struct {
	Title  string
	Labels map[string]string
}

// Label keys of session/created (section 13).
const (
	LabelCwd       = "cwd"
	LabelGitBranch = "gitBranch"
	LabelVersion   = "version"
	LabelHost      = "host"
)

// Stats counts what a mapping did.
type Stats struct {
	Lines   int // complete lines read
	Events  int // events emitted (source/line included)
	Skipped int // lines or steps mapped to nothing but their source/line
	Damaged int // unparseable lines skipped (not the last one)
	Torn    bool
}

// Builder turns the semantic steps of a format's lines into events of one
// session. Use it through ReadFile; NewBuilder exists for tests and for
// formats that map something other than a file.
type Builder struct {
	format, id string
	st         *session.State
	emit       func(schema.Envelope) error
	maxBytes   int

	// the line being mapped
	key   string
	n     int
	index int
	at    time.Time
	steps int // mapped steps of the line
	notes []string
	line  lineCheck
	// inLine: the output ToolResult has is a value the line holds
	// (ToolResultInLine).
	inLine bool
	// known is the last time a line gave; defaultAt the time of lines
	// that say none before any line does.
	known, defaultAt time.Time

	meta      schema.SessionCreated
	created   bool
	held      []schema.Envelope // source lines before session/created
	msg       *pending
	replied   bool // the open turn's last complete message had no tool calls
	compact   string
	usedTurns map[string]bool
	usedKeys  map[string]bool
	calls     map[string]string  // source call id -> tool call id
	lineEnds  map[string]lineEnd // line key -> its last event, for Rewind
	stats     Stats
	err       error
}

// lineCheck is the source/line data of the line being mapped, made and
// checked (valid's short check) before the line is mapped when the line
// is compact: a value the line holds passes that check as part of it.
type lineCheck struct {
	raw  []byte // the line
	data json.RawMessage
	// short: data is under valid's bound for its short check; ok: it
	// passes that check.
	short, ok bool
}

// pending is an assistant message whose lines are still coming.
// Its events take the ids of the lines they come from: the message the
// id of its first line, each call those of the line that holds it.
type pending struct {
	id, attempt, model string
	eventID            string // of message/assistant
	content            []json.RawMessage
	calls              []pendingCall
	usage              json.RawMessage
}

type pendingCall struct {
	ToolCall
	requested, started string // event ids
	fallback           string // the call id when the source gives none
}

// maxLabel bounds a label value of session/created.
const maxLabel = 1024

// holdLines bounds the source lines held back before session/created,
// waiting for the first prompt to name the session.
const holdLines = 32

// NewBuilder starts the mapping of session id for format; emit receives
// each event in seq order, starting at seq 1. maxEventBytes 0 means
// schema.DefaultMaxEventBytes.
func NewBuilder(format, id string, maxEventBytes int, emit func(schema.Envelope) error) *Builder {
	if maxEventBytes <= 0 {
		maxEventBytes = schema.DefaultMaxEventBytes
	}
	return &Builder{format: format, id: id, st: session.New(id), emit: emit, maxBytes: maxEventBytes,
		meta: schema.SessionCreated{Agent: format}, usedTurns: map[string]bool{}, usedKeys: map[string]bool{}, calls: map[string]string{}, lineEnds: map[string]lineEnd{}}
}

// SessionID is the id of the session being built.
func (b *Builder) SessionID() string { return b.id }

// State is the fold of the events emitted so far (do not change it).
func (b *Builder) State() *session.State { return b.st }

// Stats is what the builder did so far.
func (b *Builder) Stats() Stats { return b.stats }

// Err is the first error of emit; every step is a no-op after it.
func (b *Builder) Err() error { return b.err }

// Meta adds what the line says of the session: a title (the first one
// given wins) and labels (the first value of each key wins). Labels count
// only before session/created is written (the first prompt or other
// mapped step), so a file that grows keeps its session/created; a title
// that comes after it, when it has none, is session/titled.
func (b *Builder) Meta(m Meta) {
	b.title(m.Title)
	if b.created {
		return
	}
	for k, v := range m.Labels {
		if v == "" {
			continue
		}
		if len(v) > maxLabel {
			v = strings.ToValidUTF8(v[:maxLabel], "")
		}
		if b.meta.Labels == nil {
			b.meta.Labels = map[string]string{}
		}
		if _, ok := b.meta.Labels[k]; !ok {
			b.meta.Labels[k] = v
		}
	}
}

// title names the session with t (its first line) unless it has a name.
func (b *Builder) title(t string) {
	if b.meta.Title != "" || b.err != nil {
		return
	}
	if b.meta.Title = Title(t); b.meta.Title != "" && b.created {
		b.add(schema.Envelope{Type: schema.TypeSessionTitled}, schema.SessionTitled{Title: b.meta.Title})
	}
}

// Title is the first line of text, at most 120 characters.
func Title(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if utf8.RuneCountInString(s) > 120 {
		r := []rune(s)
		s = string(r[:119]) + "…"
	}
	return s
}

// startLine begins mapping line index (raw) with key and time.
func (b *Builder) startLine(index int, key string, at time.Time, raw []byte) {
	b.line = lineCheck{}
	if len(raw) > 0 && isCompact(raw) {
		d := sourceLineData(b.format, index, raw)
		b.line = lineCheck{raw: raw, data: d, short: len(d) < b.maxBytes-4096}
		b.line.ok = b.line.short && schema.CheckJSON(d, schema.MaxJSONDepth) == nil
	}
	if !at.IsZero() {
		b.known = at
	}
	// A line without a time shows its predecessor's; before any line
	// gave one, the file's (but the lines held for the first prompt take
	// the time of the line that releases them, when it has one: a file
	// read while it grows has another modification time each time).
	at = b.known
	if at.IsZero() {
		at = b.defaultAt
	}
	if at.IsZero() {
		at = time.Unix(0, 0).UTC() // a Builder driven without a file
	}
	k := lineKey(key, index)
	if b.usedKeys[k] {
		// A key met twice (a copied line): the line number tells them apart.
		k = lineKey(key, index) + ":" + lineKey("", index)
	}
	b.usedKeys[k] = true
	b.index, b.key, b.n, b.at, b.steps, b.notes = index, k, 0, at, 0, b.notes[:0]
	b.stats.Lines++
}

// Skip records that the line maps to no event, and why.
func (b *Builder) Skip(reason string) {
	b.notes = append(b.notes, reason)
}

// Notes are the reasons the current line's steps were skipped.
func (b *Builder) Notes() []string { return b.notes }

func (b *Builder) turnID() string {
	if b.st.Turn == nil {
		return ""
	}
	return b.st.Turn.ID
}

// Prompt is a user prompt: it opens a turn when none is open (a turn left
// open is ended as interrupted first when nothing in it is open; with a
// tool call still open the prompt joins that turn).
func (b *Builder) Prompt(content json.RawMessage) {
	if !b.step() {
		return
	}
	b.title(TextOf(content))
	b.ensureCreated()
	if b.st.Turn != nil {
		b.interruptTurn(b.replied)
	}
	if b.st.Turn == nil {
		b.openTurn()
	}
	b.add(schema.Envelope{Type: schema.TypeMessageUser, TurnID: b.turnID()}, schema.Message{Content: content})
}

// openTurn writes turn/started with a turn id made from the line key.
func (b *Builder) openTurn() {
	id := "t." + b.key
	for i := 2; b.usedTurns[id]; i++ {
		id = fmt.Sprintf("t.%s.%d", b.key, i)
	}
	b.usedTurns[id] = true
	b.replied = false
	b.add(schema.Envelope{Type: schema.TypeTurnStarted, TurnID: id}, schema.TurnStarted{})
}

// interruptTurn ends the open turn: completed when its last message was a
// complete reply without tool calls (a source that says nothing else at
// the end of a turn), else interrupted. Open attempts are interrupted; a
// turn with an open tool call or compaction cannot end and stays open.
func (b *Builder) interruptTurn(completed bool) {
	t := b.st.Turn
	if t == nil {
		return
	}
	for _, a := range b.st.Attempts {
		if a.Open() && a.TurnID == t.ID {
			b.add(schema.Envelope{Type: schema.TypeAttemptInterrupt, TurnID: t.ID, AttemptID: a.ID}, schema.Reason{Reason: "interrupted"})
		}
	}
	reason := schema.TurnInterrupted
	if completed {
		reason = schema.TurnCompleted
	}
	b.endTurn(reason)
}

func (b *Builder) endTurn(reason string) bool {
	t := b.st.Turn
	if t == nil {
		return false
	}
	e := schema.Envelope{Type: schema.TypeTurnEnded, TurnID: t.ID}
	if !b.fits(&e, schema.Reason{Reason: reason}) {
		b.Skip("turn end while a call is open")
		return false
	}
	b.add(e, schema.Reason{Reason: reason})
	return true
}

// fits reports whether the event with data may follow now.
func (b *Builder) fits(e *schema.Envelope, data any) bool {
	c := *e
	c.Data, _ = json.Marshal(data)
	c.SessionID, c.Seq = b.id, b.st.LastSeq+1
	return b.st.Check(&c) == nil
}

// Assistant is one line of an assistant message.
func (b *Builder) Assistant(a Assistant) {
	if b.err != nil {
		return
	}
	if b.msg != nil && (a.ID == "" || a.ID != b.msg.id) {
		b.finishMessage("")
	}
	b.steps++
	b.ensureCreated()
	if b.msg == nil {
		if b.st.Turn == nil {
			b.openTurn()
		}
		attempt := "a." + b.key
		b.add(schema.Envelope{Type: schema.TypeAttemptStarted, TurnID: b.turnID(), AttemptID: attempt}, schema.AttemptStarted{Model: a.Model})
		b.msg = &pending{id: a.ID, attempt: attempt, model: a.Model, eventID: b.nextID()}
	}
	m := b.msg
	m.content = append(m.content, a.Content...)
	for _, c := range a.Calls {
		pc := pendingCall{ToolCall: c, fallback: "c." + b.key + "." + fmt.Sprint(b.n)}
		pc.requested, pc.started = b.nextID(), b.nextID()
		m.calls = append(m.calls, pc)
	}
	if len(a.Usage) > 0 {
		m.usage = a.Usage
	}
	if a.ID == "" || a.Stop != "" {
		b.finishMessage(a.Stop)
	}
}

// finishMessage writes the pending message: message/assistant, then
// tool/requested + tool/started per call, then turn/ended completed when
// stop ends the turn and nothing is open.
func (b *Builder) finishMessage(stop string) {
	m := b.msg
	if m == nil {
		return
	}
	b.msg = nil
	turn := b.turnID()
	content := json.RawMessage("[]")
	if len(m.content) > 0 {
		content, _ = json.Marshal(m.content)
	}
	b.add(schema.Envelope{Type: schema.TypeMessageAssistant, TurnID: turn, AttemptID: m.attempt, EventID: m.eventID}, schema.Message{Content: content, Usage: m.usage})
	for _, c := range m.calls {
		id := ItemID(c.ID)
		if id == "" {
			id = c.fallback
		}
		if _, used := b.st.Tools[id]; used {
			b.Skip("tool call " + id + " requested twice")
			continue
		}
		input := c.Input
		if len(input) == 0 || string(input) == "null" {
			input = json.RawMessage("{}")
		}
		name := c.Name
		if name == "" {
			name = "(unnamed)" // sessionlog needs a name; the source line keeps the truth
		}
		b.add(schema.Envelope{Type: schema.TypeToolRequested, TurnID: turn, ToolCallID: id, EventID: c.requested}, schema.ToolRequested{Name: name, Input: input})
		b.add(schema.Envelope{Type: schema.TypeToolStarted, TurnID: turn, ToolCallID: id, EventID: c.started}, struct{}{})
		b.calls[c.ID] = id
	}
	b.replied = len(m.calls) == 0
	if stop != "" && stop != "tool_use" && len(m.calls) == 0 {
		b.endTurn(schema.TurnCompleted)
	}
}

// ToolResult is the result of a call: error when the source marks it so.
func (b *Builder) ToolResult(callID string, isError bool, output json.RawMessage) {
	if !b.step() {
		return
	}
	id, ok := b.calls[callID]
	t := b.st.Tools[id]
	if !ok || t == nil || !t.Open() {
		b.Skip("result for a call that is not open: " + callID)
		return
	}
	status := schema.ToolOK
	if isError {
		status = schema.ToolError
	}
	b.replied = false
	e := schema.Envelope{Type: schema.TypeToolResult, TurnID: t.TurnID, ToolCallID: id}
	if d, ok := b.toolResultData(status, output); ok {
		b.addData(e, d, true)
		return
	}
	b.add(e, schema.ToolResult{Status: status, Output: output})
}

// ToolResultInLine is ToolResult for an output that is a JSON value the
// line being mapped holds, its bytes as they are in the line (a result
// block's content): when the line's source/line passes its check, the
// output, a part of it nested a level deeper, passes its own.
func (b *Builder) ToolResultInLine(callID string, isError bool, output json.RawMessage) {
	b.inLine = true
	defer func() { b.inLine = false }()
	b.ToolResult(callID, isError, output)
}

// toolResultData is json.Marshal(schema.ToolResult{Status: status,
// Output: output}) written by hand, with ok only when it is sure to be
// those very bytes and to pass valid (so shrink has nothing to do): the
// output is compact (what json.Marshal compacts stays as it is), one
// JSON value that passes CheckJSON a level less deep than the data (the
// data nests it in one object), and the data is under valid's bound for
// its short check. The marshaler's escapes of <, >, & and U+2028/U+2029
// are json.HTMLEscape's. A result's output is most of an import's bytes,
// and the marshaler checks and compacts it with its slower scanner only
// to give it back as it was (BenchmarkToolResultData).
func (b *Builder) toolResultData(status string, output json.RawMessage) (json.RawMessage, bool) {
	const head, mid = `{"status":"`, `","output":`
	size := len(head) + len(status) + len(mid) + len(output) + 1
	// An output of a line that passed its check is compact as the line
	// is, and passes its own check (ToolResultInLine).
	checked := b.inLine && b.line.ok
	if len(output) == 0 || size >= b.maxBytes-4096 || !plainStatus(status) ||
		!checked && (!isCompact(output) || schema.CheckJSON(output, schema.MaxJSONDepth-1) != nil) {
		return nil, false
	}
	d := bytes.NewBuffer(make([]byte, 0, size+64))
	d.WriteString(head)
	d.WriteString(status)
	d.WriteString(mid)
	htmlEscape(d, output)
	d.WriteByte('}')
	if d.Len() >= b.maxBytes-4096 {
		return nil, false // its escapes took it over
	}
	return d.Bytes(), true
}

// plainStatus: a tool status json.Marshal writes as it is.
func plainStatus(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 'a' || c > 'z' {
			if c != '_' {
				return false
			}
		}
	}
	return s != ""
}

// EndTurn ends the open turn with reason (schema.TurnCompleted, ...): the
// source said so. With a call open the turn stays open (skipped).
func (b *Builder) EndTurn(reason string) {
	if !b.step() {
		return
	}
	if b.st.Turn == nil {
		b.Skip("turn end without an open turn")
		return
	}
	if reason != schema.TurnCompleted {
		b.interruptTurn(false)
		return
	}
	b.endTurn(reason)
}

// Interrupt is an interruption of the open turn by the user.
func (b *Builder) Interrupt() { b.EndTurn(schema.TurnInterrupted) }

// CompactionStart is the start of a compaction: everything so far is
// replaced by the summary that CompactionEnd brings.
func (b *Builder) CompactionStart() {
	if !b.step() {
		return
	}
	b.ensureCreated()
	if b.compact != "" {
		b.Skip("compaction already open")
		return
	}
	id := "c." + b.key
	b.add(schema.Envelope{Type: schema.TypeCompactionStarted}, schema.CompactionStarted{CompactionID: id, ThroughSeq: b.st.LastSeq})
	b.compact = id
}

// CompactionEnd ends the open compaction with its summary (one is started
// first when none is open).
func (b *Builder) CompactionEnd(summary string) {
	if b.compact == "" {
		b.CompactionStart()
	} else if !b.step() {
		return
	}
	c := b.st.Compactions[b.compact]
	if c == nil || !c.Open() {
		return
	}
	if summary == "" {
		summary = "(empty summary)"
	}
	b.add(schema.Envelope{Type: schema.TypeCompactionEnded}, schema.CompactionEnded{CompactionID: b.compact, Summary: summary, ThroughSeq: c.ThroughSeq})
	b.compact = ""
}

// Compaction is a compaction whose summary comes on the same line.
func (b *Builder) Compaction(summary string) {
	b.CompactionStart()
	b.CompactionEnd(summary)
}

// step begins a mapped step and finishes a pending assistant message
// (any step but another line of that message ends it). It reports false
// after an error.
func (b *Builder) step() bool {
	if b.err != nil {
		return false
	}
	if b.msg != nil {
		b.finishMessage("")
	}
	b.steps++
	return true
}

// ensureCreated writes session/created and the source lines held back.
func (b *Builder) ensureCreated() {
	if b.created || b.err != nil {
		return
	}
	b.created = true
	b.add(schema.Envelope{Type: schema.TypeSessionCreated, EventID: "created"}, b.meta)
	held := b.held
	b.held = nil
	for _, e := range held {
		b.put(e)
	}
}

// add writes the next event of the line with data.
func (b *Builder) add(e schema.Envelope, data any) {
	if b.err != nil {
		return
	}
	d, err := json.Marshal(data)
	if err != nil {
		b.err = fmt.Errorf("agentlog: %s: %w", e.Type, err)
		return
	}
	b.addData(e, d, false)
}

// addData writes the next event of the line with data d, encoded; valid
// says that d passes valid already (shrink would leave it as it is).
func (b *Builder) addData(e schema.Envelope, d json.RawMessage, valid bool) {
	if b.err != nil {
		return
	}
	e.Data = d
	if e.EventID == "" {
		e.EventID = eventID(b.key, b.n)
		b.n++
	}
	if !b.created {
		b.ensureCreated()
	}
	if !valid {
		b.shrink(&e)
	}
	b.put(e)
}

// put sequences e, checks it against the session's rules and emits it.
func (b *Builder) put(e schema.Envelope) {
	if b.err != nil {
		return
	}
	e.SchemaVersion = schema.Version
	e.SessionID = b.id
	e.Seq = b.st.LastSeq + 1
	if e.Time.IsZero() {
		e.Time = b.at
	}
	if err := b.st.Apply(&e); err != nil {
		// A mapping that breaks a rule is a bug of the format: say which.
		b.err = fmt.Errorf("agentlog: %s line %d: %s: %w", b.id, b.index, e.Type, err)
		return
	}
	b.stats.Events++
	if i := strings.LastIndexByte(e.EventID, '.'); i > 0 {
		b.lineEnds[e.EventID[:i]] = lineEnd{e.Seq, e.EventID}
	}
	if err := b.emit(e); err != nil {
		b.err = err
	}
}

// shrink makes the data of a mapped event one the writer accepts: JSON
// with a duplicated key is written again (the last value wins, as
// encoding/json reads it), and data over the size limit keeps the head of
// its model-visible text and a note (the whole line stays in its
// source/line parts).
func (b *Builder) shrink(e *schema.Envelope) {
	if b.valid(e) == nil {
		return
	}
	var v any
	if json.Unmarshal(e.Data, &v) == nil {
		if d, err := json.Marshal(v); err == nil {
			e.Data = d
			if b.valid(e) == nil {
				return
			}
		}
	}
	budget := b.maxBytes / 2
	switch e.Type {
	case schema.TypeToolResult:
		var d schema.ToolResult
		if json.Unmarshal(e.Data, &d) == nil {
			d.Output = cutText(TextOf(d.Output), budget)
			e.Data, _ = json.Marshal(d)
		}
	case schema.TypeMessageUser, schema.TypeMessageAssistant:
		var d schema.Message
		if json.Unmarshal(e.Data, &d) == nil {
			d.Content, d.Usage = cutText(TextOf(d.Content), budget), nil
			e.Data, _ = json.Marshal(d)
		}
	case schema.TypeToolRequested:
		var d schema.ToolRequested
		if json.Unmarshal(e.Data, &d) == nil {
			d.Input, _ = json.Marshal(map[string]string{"truncated": string(cutText(string(d.Input), budget))})
			e.Data, _ = json.Marshal(d)
		}
	case schema.TypeCompactionEnded:
		var d schema.CompactionEnded
		if json.Unmarshal(e.Data, &d) == nil {
			var s string
			_ = json.Unmarshal(cutText(d.Summary, budget), &s)
			d.Summary = s
			e.Data, _ = json.Marshal(d)
		}
	}
}

// cutText is s as a JSON string, cut to about budget bytes with a note.
func cutText(s string, budget int) json.RawMessage {
	if parts := splitText(s, budget); len(parts) > 1 {
		s = parts[0] + fmt.Sprintf("\n[cut by sessionlog import: %d bytes in all; the whole line is kept as source/line]", len(s))
	}
	out, _ := json.Marshal(s)
	return out
}

// valid checks e as the writer will: the whole check near the size limit,
// else only the JSON depth (the envelope around the data is small).
func (b *Builder) valid(e *schema.Envelope) error {
	if len(e.Data) < b.maxBytes-4096 {
		return schema.CheckJSON(e.Data, schema.MaxJSONDepth)
	}
	c := *e
	c.SchemaVersion, c.SessionID, c.Seq, c.Time = schema.Version, b.id, 1, time.Unix(0, 0).UTC()
	return schema.Validate(&c, schema.ValidateOptions{MaxEventBytes: b.maxBytes})
}

// compactLine is raw compacted (compactLine), raw itself when startLine
// found it compact.
func (b *Builder) compactLine(buf *bytes.Buffer, raw []byte) ([]byte, error) {
	if b.isLine(raw) {
		return raw, nil
	}
	return compactLine(buf, raw)
}

// isLine reports whether raw is the line startLine found compact.
func (b *Builder) isLine(raw []byte) bool {
	return b.line.data != nil && len(raw) == len(b.line.raw) && &raw[0] == &b.line.raw[0]
}

// sourceLine writes the line's source/line event(s): the JSON value, or
// its text in parts when the value is over the size limit (or nested
// deeper than sessionlog accepts).
func (b *Builder) sourceLine(raw []byte) {
	if b.err != nil {
		return
	}
	e := schema.Envelope{Type: TypeSourceLine, Ignorable: true, EventID: eventID(b.key, b.n), Time: b.at}
	pre := b.isLine(raw)
	if pre {
		e.Data = b.line.data // made and checked by startLine
	} else {
		e.Data = sourceLineData(b.format, b.index, raw)
	}
	var parts []string
	if pre && b.line.short && b.line.ok || !(pre && b.line.short) && b.valid(&e) == nil {
		b.n++
	} else {
		parts = splitText(string(raw), b.maxBytes-2048)
	}
	var out []schema.Envelope
	if parts == nil {
		out = []schema.Envelope{e}
	}
	for i, p := range parts {
		pe := schema.Envelope{Type: TypeSourceLine, Ignorable: true, EventID: eventID(b.key, b.n), Time: b.at}
		b.n++
		pe.Data, _ = json.Marshal(SourceLine{Format: b.format, Index: b.index, Part: i + 1, Parts: len(parts), Text: p})
		out = append(out, pe)
	}
	if b.steps == 0 {
		b.stats.Skipped++
	}
	for _, e := range out {
		if !b.created {
			e.Time = b.known // zero: the releasing line's time
			b.held = append(b.held, e)
			if len(b.held) >= holdLines {
				b.ensureCreated()
			}
			continue
		}
		b.put(e)
	}
}

// sourceLineData is json.Marshal(SourceLine{Format: format, Index: index,
// Line: raw}) for raw a compact JSON value, written by hand: the marshaler
// would check and compact the line once more only to escape its HTML
// characters as it does (BenchmarkSourceLineData).
func sourceLineData(format string, index int, raw []byte) json.RawMessage {
	f, err := json.Marshal(format)
	if err != nil || len(raw) == 0 {
		d, _ := json.Marshal(SourceLine{Format: format, Index: index, Line: raw})
		return d
	}
	d := bytes.NewBuffer(make([]byte, 0, len(raw)+len(f)+32))
	d.WriteString(`{"format":`)
	d.Write(f)
	d.WriteString(`,"index":`)
	d.Write(strconv.AppendInt(d.AvailableBuffer(), int64(index), 10))
	d.WriteString(`,"line":`)
	htmlEscape(d, raw)
	d.WriteByte('}')
	return d.Bytes()
}

// htmlEscape is json.HTMLEscape(d, src): src as it is when it has none of
// the bytes that escape (<, >, & and the lead byte 0xE2 of U+2028 and
// U+2029), found with bytes.IndexByte, which is many times faster than
// json.HTMLEscape's loop over each byte (BenchmarkHTMLEscape); else
// json.HTMLEscape itself.
func htmlEscape(d *bytes.Buffer, src []byte) {
	if bytes.IndexByte(src, '<') < 0 && bytes.IndexByte(src, '>') < 0 && bytes.IndexByte(src, '&') < 0 &&
		bytes.IndexByte(src, 0xE2) < 0 {
		d.Write(src)
		return
	}
	json.HTMLEscape(d, src)
}

// splitText cuts s at rune boundaries into parts whose JSON encoding
// (escapes included) is at most budget bytes.
func splitText(s string, budget int) []string {
	var parts []string
	start, size := 0, 2
	for i, r := range s {
		n := escapedLen(r)
		if size+n > budget {
			parts = append(parts, s[start:i])
			start, size = i, 2
		}
		size += n
	}
	return append(parts, s[start:])
}

// escapedLen is the length json.Marshal gives r inside a string.
func escapedLen(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029 || r == utf8.RuneError:
		return 6
	}
	return utf8.RuneLen(r)
}

// finish ends the mapping. Source lines still held (a file with no
// prompt yet) stay held: what a file maps to must not depend on where it
// ends, so that a file that grows gives the same events for its old
// lines (session/created would otherwise lose the title the prompt
// brings). They come with the prompt, or once holdLines are held.
func (b *Builder) finish() error {
	return b.err
}

// TextOf is the text of a content value: a JSON string, or the "text" of
// its blocks joined by newlines; any other value as its JSON.
func TextOf(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) == nil {
		var parts []string
		for _, bl := range blocks {
			if bl.Text != "" {
				parts = append(parts, bl.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(content)
}
