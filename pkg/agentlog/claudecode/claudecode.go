// Package claudecode reads and writes Claude Code's session files
// (~/.claude/projects/<project>/<session>.jsonl and the subagent files
// <session>/subagents/agent-<id>.jsonl) for agentlog. docs/agentlog.md
// says which version of the format it follows and what each line becomes.
package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Name is the format's --from/--to name.
const Name = "claude-code"

// Prefix starts the sessionlog id of every Claude Code session.
const Prefix = "cc"

// Format is Claude Code's format.
type Format struct{}

var _ agentlog.Format = Format{}

func (Format) Name() string { return Name }

// IsSessionFile: a .jsonl file outside any subagents directory (a
// session), or an agent-<id>.jsonl somewhere under one (a subagent; newer
// versions nest workflow agents deeper). Other files under subagents
// (a workflow's journal.jsonl) are not sessions.
func (Format) IsSessionFile(path string) bool {
	if !strings.HasSuffix(path, ".jsonl") {
		return false
	}
	_, _, sub := subagent(path)
	return sub || !underSubagents(path)
}

// SessionID is cc-<sessionId> for <sessionId>.jsonl and
// cc-<sessionId>-<agentId> for <sessionId>/subagents/.../agent-<agentId>.jsonl.
func (Format) SessionID(path string, _ []byte) (string, error) {
	stem := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if stem == "" {
		return "", errors.New("no session id in the file name")
	}
	if parent, agent, ok := subagent(path); ok {
		return agentlog.SessionID(Prefix, parent+"-"+agent), nil
	}
	return agentlog.SessionID(Prefix, stem), nil
}

// subagent splits a subagent file's path into its session and agent id:
// the file is agent-<id>.jsonl below a directory "subagents" whose parent
// is named after the session.
func subagent(path string) (session, agent string, ok bool) {
	stem := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if !strings.HasPrefix(stem, "agent-") {
		return "", "", false
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if filepath.Base(dir) == "subagents" {
			return filepath.Base(filepath.Dir(dir)), strings.TrimPrefix(stem, "agent-"), true
		}
		if next := filepath.Dir(dir); next == dir {
			return "", "", false
		}
	}
}

func underSubagents(path string) bool {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if filepath.Base(dir) == "subagents" {
			return true
		}
		if next := filepath.Dir(dir); next == dir {
			return false
		}
	}
}

// line is the part of a Claude Code line the mapping reads.
type line struct {
	Type             string          `json:"type"`
	Subtype          string          `json:"subtype"`
	UUID             string          `json:"uuid"`
	ParentUUID       *string         `json:"parentUuid"`
	LogicalParent    string          `json:"logicalParentUuid"`
	IsSidechain      bool            `json:"isSidechain"`
	IsMeta           bool            `json:"isMeta"`
	IsCompactSummary bool            `json:"isCompactSummary"`
	SessionID        string          `json:"sessionId"`
	AgentID          string          `json:"agentId"`
	Cwd              string          `json:"cwd"`
	GitBranch        string          `json:"gitBranch"`
	Version          string          `json:"version"`
	Timestamp        string          `json:"timestamp"`
	Summary          string          `json:"summary"`
	Message          json.RawMessage `json:"message"`

	// msg is the message when decodeLine decoded it with the line (then
	// Message is empty); nil: decode Message.
	msg *message
}

// lineWithMessage is a line whose message is decoded in the same pass.
type lineWithMessage struct {
	line
	Message *message `json:"message"`
}

// decodeLine decodes a line, its message with it when that gives what
// decoding the line and then its message alone gives. fastLine decodes
// the common line; with encoding/json, that is when the line has at
// most one key that encoding/json could match to "message" (two would be
// merged into one message where the line's own decode keeps the last),
// and the message is an object. Anything else is decoded in two passes.
// FuzzDecodeLine holds the two equal.
func decodeLine(raw []byte, l *line) error {
	if fastLine(raw, l) {
		return nil
	}
	if atMostOneMessageKey(raw) {
		var lm lineWithMessage
		if json.Unmarshal(raw, &lm) == nil && lm.Message != nil {
			*l = lm.line
			l.msg = lm.Message
			return nil
		}
	}
	*l = line{}
	return json.Unmarshal(raw, l)
}

// atMostOneMessageKey reports whether raw has at most one string that
// encoding/json's case-folding key match could take for "message": at
// most one `message"` in any case followed by a colon (isKeyEnd), and no
// escape or rune that could spell one of its letters otherwise (\u00XX,
// \u017F, U+017F, which folds to s).
func atMostOneMessageKey(raw []byte) bool {
	if bytes.Contains(raw, []byte("\xc5\xbf")) {
		return false
	}
	for rest := raw; ; {
		i := bytes.Index(rest, []byte(`\u`))
		if i < 0 {
			break
		}
		if len(rest) < i+6 {
			return false
		}
		r, err := strconv.ParseUint(string(rest[i+2:i+6]), 16, 32)
		if err != nil || r < 0x80 || r == 0x17f {
			return false
		}
		rest = rest[i+6:]
	}
	const key = `message"`
	n := 0
	for rest := raw; ; {
		i := bytes.IndexByte(rest, '"')
		if i < 0 {
			return true
		}
		if i >= len(key)-1 && bytes.EqualFold(rest[i-len(key)+1:i+1], []byte(key)) && isKeyEnd(rest[i+1:]) {
			if n++; n > 1 {
				return false
			}
		}
		rest = rest[i+1:]
	}
}

// isKeyEnd reports whether what follows a closing quote makes its string
// an object key: a colon, after whitespace if any. The quote of a
// `message"` is a closing one (a letter is before it: not an escape, and
// valid JSON never opens a string after a letter), so a string value that
// ends in "message" (an assistant message's "type":"message") is not
// counted as a key; invalid JSON fails the one-pass decode anyway.
func isKeyEnd(after []byte) bool {
	after = bytes.TrimLeft(after, " \t\r\n")
	return len(after) > 0 && after[0] == ':'
}

// message decodes the line's message.
func (l *line) message() (message, error) {
	if l.msg != nil {
		return *l.msg, nil
	}
	var msg message
	err := json.Unmarshal(l.Message, &msg)
	return msg, err
}

// message is the Anthropic API message a user or assistant line carries.
type message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      json.RawMessage `json:"usage"`
}

// block is one content block.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// maybeString reports whether v (a JSON value) can decode into a Go
// string: a string or null. An array of blocks is not tried as one (that
// would scan it twice more).
func maybeString(v json.RawMessage) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && (v[0] == '"' || v[0] == 'n')
}

// interruptPrefix starts the text Claude Code writes as a user line when
// the user stops a turn ("[Request interrupted by user]", "... for tool use]").
const interruptPrefix = "[Request interrupted by user"

func (Format) NewMapper(string) agentlog.Mapper {
	return &mapper{parent: map[string]string{}, conv: map[string]bool{}}
}

// mapper remembers whether the file is a subagent's (all its lines are a
// sidechain): in a main file, sidechain lines are an older Claude Code's
// inline subagent and stay out of the conversation. It follows the
// conversation's tree as far as a rewind needs: the parent of every line,
// which lines are the conversation's (user, assistant, compact_boundary),
// and the last of them, the leaf a new prompt continues.
type mapper struct {
	sidechainFile *bool
	parent        map[string]string
	conv          map[string]bool
	leaf          string
}

func (m *mapper) Decode(raw []byte) (agentlog.Line, error) {
	var l line
	if err := decodeLine(raw, &l); err != nil {
		return agentlog.Line{}, err
	}
	if l.Type == "" {
		return agentlog.Line{}, errors.New("no type")
	}
	m.see(&l)
	out := agentlog.Line{Key: l.UUID, Value: &l}
	if t, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
		out.Time = t.UTC()
	}
	return out, nil
}

// see notes whether the file is a subagent's from its first user or
// assistant line.
func (m *mapper) see(l *line) {
	if m.sidechainFile == nil && (l.Type == "user" || l.Type == "assistant") {
		sc := l.IsSidechain
		m.sidechainFile = &sc
	}
}

func (m *mapper) inlineSidechain(l *line) bool {
	return l.IsSidechain && (m.sidechainFile == nil || !*m.sidechainFile)
}

func (m *mapper) Map(b *agentlog.Builder, al agentlog.Line) {
	l := al.Value.(*line)
	if l.UUID != "" {
		if _, seen := m.parent[l.UUID]; !seen && l.ParentUUID != nil {
			m.parent[l.UUID] = *l.ParentUUID
		}
		if (l.Type == "user" || l.Type == "assistant") && !m.inlineSidechain(l) ||
			l.Type == "system" && l.Subtype == "compact_boundary" {
			defer func() { m.leaf, m.conv[l.UUID] = l.UUID, true }()
		}
	}
	b.Meta(agentlog.Meta{Labels: map[string]string{
		agentlog.LabelCwd: l.Cwd, agentlog.LabelGitBranch: l.GitBranch, agentlog.LabelVersion: l.Version,
	}})
	if m.sidechainFile != nil && *m.sidechainFile && l.SessionID != "" {
		b.Meta(agentlog.Meta{Labels: map[string]string{"sidechainOf": agentlog.SessionID(Prefix, l.SessionID), "agentId": l.AgentID}})
	}
	if m.inlineSidechain(l) {
		b.Skip("a subagent's line inside the main file (older Claude Code): not mapped")
		return
	}
	switch l.Type {
	case "summary":
		b.Meta(agentlog.Meta{Title: l.Summary})
		b.Skip("summary: the session's title")
	case "user":
		m.user(b, l)
	case "assistant":
		m.assistant(b, l)
	case "system":
		switch l.Subtype {
		case "compact_boundary":
			b.CompactionStart()
			return
		case "stop_hook_summary":
			// The Stop hooks ran: the agent finished its reply, whose
			// lines say no stop reason in Claude Code 2.1.
			b.EndTurn(schema.TurnCompleted)
			return
		}
		b.Skip("system line " + l.Subtype + ": display only")
	default:
		b.Skip("line type " + l.Type + ": not part of the conversation")
	}
}

func (m *mapper) user(b *agentlog.Builder, l *line) {
	msg, err := l.message()
	if err != nil || len(msg.Content) == 0 {
		b.Skip("user line without a message")
		return
	}
	if l.IsCompactSummary {
		b.CompactionEnd(agentlog.TextOf(msg.Content))
		return
	}
	if l.IsMeta {
		b.Skip("meta line (a caveat or reminder Claude Code adds): not a prompt")
		return
	}
	var s string
	if maybeString(msg.Content) && json.Unmarshal(msg.Content, &s) == nil {
		m.rewind(b, l)
		if strings.HasPrefix(s, interruptPrefix) {
			b.UserMessage(msg.Content)
			b.Interrupt()
			return
		}
		b.Prompt(msg.Content)
		return
	}
	m.userContent(b, l, msg.Content)
}

// userContent maps user content that is not a string: a line of tool
// results in one pass (onlyResults), any other as userBlocks does.
func (m *mapper) userContent(b *agentlog.Builder, l *line, content json.RawMessage) {
	if results, ok := onlyResults(content); ok {
		// A line of results: no rewind, and its blocks need no raw bytes.
		for _, bl := range results {
			toolResult(b, bl)
		}
		return
	}
	m.userBlocks(b, l, content)
}

// userBlocks maps user content that is not a string: blocks.
func (m *mapper) userBlocks(b *agentlog.Builder, l *line, content json.RawMessage) {
	var blocks []json.RawMessage
	if err := json.Unmarshal(content, &blocks); err != nil {
		b.Skip("user content is neither text nor blocks")
		return
	}
	var rest []json.RawMessage
	interrupted := false
	// Each block is decoded once: a tool_result block counts as a result
	// even when the rest of it does not decode, and gives one only when
	// it does.
	results := 0
	var decoded []block
	for _, raw := range blocks {
		var bl block
		err := json.Unmarshal(raw, &bl)
		switch {
		case bl.Type == "tool_result":
			results++
			if err == nil {
				decoded = append(decoded, bl)
			}
		case bl.Type == "text" && strings.HasPrefix(bl.Text, interruptPrefix):
			interrupted = true
		default:
			rest = append(rest, raw)
		}
	}
	if results == 0 {
		m.rewind(b, l)
	}
	for _, bl := range decoded {
		// Paired by id, whatever line the result is parented to.
		toolResult(b, bl)
	}
	switch {
	case results > 0:
		// A line of results: its text, if any, is not a prompt.
	case interrupted && len(rest) == 0:
		// What the model reads next; then the turn ends.
		b.UserMessage(content)
	case len(rest) > 0:
		content, _ := json.Marshal(rest)
		b.Prompt(content)
	}
	if interrupted {
		b.Interrupt()
	}
}

// toolResult maps a tool_result block: its content, a value of the
// line, is its output ("" when it has none).
func toolResult(b *agentlog.Builder, bl block) {
	if len(bl.Content) == 0 {
		b.ToolResult(bl.ToolUseID, bl.IsError, json.RawMessage(`""`))
		return
	}
	b.ToolResultInLine(bl.ToolUseID, bl.IsError, bl.Content)
}

// onlyResults decodes user content that is nothing but tool_result blocks
// (the common user line: a call's output) in one pass, where the general
// path decodes the array and then each block; ok is false for any other
// content, and for any that does not decode whole, which the general
// path takes (it decodes each block on its own). With ok, each block
// decoded as the general path decodes it, all are results, so there is no
// rewind, no prompt and no interrupt: the line is its results.
// BenchmarkUserResults compares the two.
func onlyResults(content json.RawMessage) ([]block, bool) {
	blocks, _, ok := fastBlocks(content)
	if !ok && json.Unmarshal(content, &blocks) != nil || len(blocks) == 0 {
		return nil, false
	}
	for _, bl := range blocks {
		if bl.Type != "tool_result" {
			return nil, false
		}
	}
	return blocks, true
}

// rewind checks a user line that is not a tool result against the
// conversation's leaf: Claude Code parents a new prompt to the last line
// of the conversation (through the progress, system and attachment lines
// that sit in the chain), so a prompt whose nearest user or assistant
// ancestor is not the leaf went back to that ancestor (a rewind, or a
// resume from an earlier message), and the model's context continues
// from there.
func (m *mapper) rewind(b *agentlog.Builder, l *line) {
	if m.leaf == "" {
		return // the first message: nothing to go back from
	}
	at := ""
	if l.ParentUUID != nil {
		at = *l.ParentUUID
	}
	for steps := 0; at != "" && steps <= len(m.parent); steps++ {
		if m.conv[at] {
			break
		}
		at = m.parent[at] // "" for a line not in the file: a root
	}
	if at == m.leaf {
		return
	}
	b.Rewind(at) // "": back to the start
}

func (m *mapper) assistant(b *agentlog.Builder, l *line) {
	msg, err := l.message()
	if err != nil {
		b.Skip("assistant line without a message")
		return
	}
	a := agentlog.Assistant{ID: msg.ID, Model: msg.Model, Usage: msg.Usage}
	if a.ID == "" {
		a.ID = "line-" + l.UUID
	}
	if msg.StopReason != nil {
		a.Stop = *msg.StopReason
	}
	// The blocks decoded in one pass (fastBlocks), else each on its own.
	decoded, blocks, fast := fastBlocks(msg.Content)
	if !fast && json.Unmarshal(msg.Content, &blocks) != nil {
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			t, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			blocks = []json.RawMessage{t}
		}
	}
	for i, raw := range blocks {
		var bl block
		if fast {
			bl = decoded[i]
		} else {
			_ = json.Unmarshal(raw, &bl)
		}
		if bl.Type == "tool_use" {
			a.Calls = append(a.Calls, agentlog.ToolCall{ID: bl.ID, Name: bl.Name, Input: bl.Input})
			continue
		}
		a.Content = append(a.Content, raw)
	}
	b.Assistant(a)
}
