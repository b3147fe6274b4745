// Package codex reads and writes the rollout files of OpenAI's codex CLI
// (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) for agentlog: which line
// becomes which event is in docs/agentlog.md, section codex.
package codex

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
)

// Name is the --from/--to name of the format.
const Name = "codex"

// Format is the codex rollout format.
type Format struct{}

var _ agentlog.Format = Format{}

// Name is "codex".
func (Format) Name() string { return Name }

// IsSessionFile: rollout-*.jsonl.
func (Format) IsSessionFile(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, "rollout-") && strings.HasSuffix(base, ".jsonl")
}

// SessionID is codex-<session_meta.payload.id> of the file's first line.
func (Format) SessionID(_ string, first []byte) (string, error) {
	var l rolloutLine
	if err := json.Unmarshal(first, &l); err != nil {
		return "", err
	}
	var m sessionMeta
	if l.Type != kindSessionMeta || json.Unmarshal(l.Payload, &m) != nil || m.ID == "" {
		return "", errors.New("codex: the first line is not a session_meta with an id")
	}
	return agentlog.SessionID(Name, m.ID), nil
}

// NewMapper starts a pass over one rollout file.
func (Format) NewMapper(string) agentlog.Mapper { return &mapper{} }

// mapper is the state of one pass: what earlier lines said that later
// ones need.
type mapper struct {
	meta  bool   // the session_meta was read
	model string // of the last turn_context
	// task: a task_started came and no prompt has used it yet; inTask: the
	// open turn began in a task, so further prompts join it (input the
	// user sends while codex works) instead of ending it.
	task, inTask bool
	// resp groups the items of one model response into one assistant
	// message: the key of its first line, "" between responses.
	resp  string
	lines int // lines mapped so far
}

// Decode parses a RolloutLine.
func (m *mapper) Decode(raw []byte) (agentlog.Line, error) {
	var l rolloutLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return agentlog.Line{}, err
	}
	if l.Type == "" {
		return agentlog.Line{}, errors.New("codex: a line without a type")
	}
	t, _ := time.Parse(time.RFC3339Nano, l.Timestamp)
	return agentlog.Line{Time: t, Value: &l}, nil
}

// Map drives b with the steps of one line.
func (m *mapper) Map(b *agentlog.Builder, l agentlog.Line) {
	r := l.Value.(*rolloutLine)
	m.lines++
	switch r.Type {
	case kindSessionMeta:
		m.sessionMeta(b, r.Payload)
	case kindTurnContext:
		var tc turnContext
		if json.Unmarshal(r.Payload, &tc) == nil && tc.Model != "" {
			m.model = tc.Model
		}
		b.Skip("turn_context: settings of the turn")
	case kindCompacted:
		var c compactedItem
		if json.Unmarshal(r.Payload, &c) != nil {
			b.Skip("compacted: unreadable payload")
			return
		}
		m.resp = ""
		b.Compaction(compactedSummary(&c))
	case kindResponseItem:
		var it responseItem
		if json.Unmarshal(r.Payload, &it) != nil {
			b.Skip("response_item: unreadable payload")
			return
		}
		m.item(b, &it)
	case kindEventMsg:
		var ev eventMsg
		if json.Unmarshal(r.Payload, &ev) != nil {
			b.Skip("event_msg: unreadable payload")
			return
		}
		m.event(b, &ev)
	default:
		b.Skip("line type " + r.Type + " is not mapped")
	}
}

func (m *mapper) sessionMeta(b *agentlog.Builder, payload json.RawMessage) {
	var sm sessionMeta
	if m.meta || json.Unmarshal(payload, &sm) != nil {
		b.Skip("session_meta: not the first")
		return
	}
	m.meta = true
	labels := map[string]string{agentlog.LabelCwd: sm.Cwd, agentlog.LabelVersion: sm.CLIVersion, "originator": sm.Originator,
		agentlog.LabelModelProvider: sm.ModelProvider}
	if sm.Git != nil {
		labels[agentlog.LabelGitBranch] = sm.Git.Branch
	}
	if sm.ForkedFromID != "" {
		labels[LabelForkedFrom] = agentlog.SessionID(Name, sm.ForkedFromID)
	}
	b.Meta(agentlog.Meta{Labels: labels})
}

// LabelForkedFrom names the session a forked codex thread was forked from.
const LabelForkedFrom = "forkedFrom"

func textBlock(text string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", text})
	return b
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func (m *mapper) item(b *agentlog.Builder, it *responseItem) {
	switch it.Type {
	case "message":
		text := messageText(it.Content)
		switch {
		case it.Role == "assistant":
			m.reply(b, agentlog.Assistant{Content: []json.RawMessage{textBlock(text)}})
		case it.Role == "user" && !injected(text):
			m.resp = ""
			if b.State().Turn != nil && m.inTask {
				b.UserMessage(jsonString(text))
				return
			}
			if b.State().Turn == nil {
				m.inTask, m.task = m.task, false
			}
			b.Prompt(jsonString(text))
		case it.Role == "user" || it.Role == "developer":
			m.resp = ""
			b.UserMessage(jsonString(text))
		default:
			b.Skip("message of role " + it.Role)
		}
	case "function_call", "custom_tool_call", "local_shell_call":
		call, ok := toolCall(it)
		if !ok {
			b.Skip(it.Type + " without a call id")
			return
		}
		m.reply(b, agentlog.Assistant{Calls: []agentlog.ToolCall{call}})
	case "function_call_output", "custom_tool_call_output":
		m.resp = ""
		out, failed := toolOutput(it.Output)
		b.ToolResult(it.CallID, failed, out)
	default:
		b.Skip("response item " + it.Type + " is not mapped")
	}
}

// reply adds a line of the current model response: the items of one
// response (its message, its calls) are one assistant message.
func (m *mapper) reply(b *agentlog.Builder, a agentlog.Assistant) {
	if m.resp == "" {
		m.resp = "r" + strconv.Itoa(m.lines)
	}
	a.ID, a.Model = m.resp, m.model
	b.Assistant(a)
}

func toolCall(it *responseItem) (agentlog.ToolCall, bool) {
	if it.CallID == "" {
		return agentlog.ToolCall{}, false
	}
	c := agentlog.ToolCall{ID: it.CallID, Name: it.Name}
	switch it.Type {
	case "function_call":
		c.Input = json.RawMessage(it.Arguments)
		if !json.Valid(c.Input) {
			c.Input = jsonString(it.Arguments)
		}
	case "custom_tool_call":
		c.Input = jsonString(it.Input)
	case "local_shell_call":
		c.Name, c.Input = "local_shell", it.Action
	}
	if len(c.Input) == 0 {
		c.Input = json.RawMessage("{}")
	}
	return c, true
}

func (m *mapper) event(b *agentlog.Builder, ev *eventMsg) {
	switch ev.Type {
	case "task_started":
		m.resp = ""
		if b.State().Turn != nil {
			b.Interrupt()
		} else {
			b.Skip("task_started: the turn opens with its prompt")
		}
		m.task = true
	case "task_complete":
		m.resp = ""
		if b.State().Turn == nil {
			b.Skip("task_complete without an open turn")
			return
		}
		b.EndTurn("completed")
	case "turn_aborted":
		m.resp = ""
		if b.State().Turn == nil {
			b.Skip("turn_aborted without an open turn")
			return
		}
		b.Interrupt()
	case "token_count":
		if m.resp == "" {
			b.Skip("token_count: statistics")
			return
		}
		// codex counts the tokens of a model response once it is
		// complete: the message ends here (its calls are written now, not
		// only when a later step comes), with the response's usage. The
		// stop reason "tool_use" completes it without ending the turn.
		a := agentlog.Assistant{ID: m.resp, Stop: "tool_use"}
		if ev.Info != nil {
			a.Usage = ev.Info.LastTokenUsage
		}
		m.resp = ""
		b.Assistant(a)
	default:
		b.Skip("event " + ev.Type + " repeats a response item or is for display")
	}
}

// compactedSummary is the summary of a compacted line: its message, or
// the text of its replacement history when the message is empty.
func compactedSummary(c *compactedItem) string {
	if strings.TrimSpace(c.Message) != "" {
		return c.Message
	}
	var parts []string
	for _, raw := range c.ReplacementHistory {
		var it responseItem
		if json.Unmarshal(raw, &it) == nil && it.Type == "message" {
			parts = append(parts, messageText(it.Content))
		}
	}
	return strings.Join(parts, "\n")
}
