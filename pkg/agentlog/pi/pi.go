// Package pi reads and writes the session files of the pi coding agent
// (~/.pi/agent/sessions/<cwd>/<time>_<uuid>.jsonl) for agentlog: which
// entry becomes which event is in docs/agentlog.md, section pi.
package pi

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
)

// Name is the --from/--to name of the format.
const Name = "pi"

// LabelParentSession is the session file a pi session was forked from, as
// its header names it.
const LabelParentSession = "parentSession"

// Format is the pi session format, version 3.
type Format struct{}

var _ agentlog.Format = Format{}

// Name is "pi".
func (Format) Name() string { return Name }

// IsSessionFile: <time>_<uuid>.jsonl.
func (Format) IsSessionFile(path string) bool {
	base := filepath.Base(path)
	return strings.HasSuffix(base, ".jsonl") && strings.Contains(base, "_")
}

// SessionID is pi-<header id>.
func (Format) SessionID(_ string, first []byte) (string, error) {
	var h header
	if err := json.Unmarshal(first, &h); err != nil {
		return "", err
	}
	if h.Type != typeSession || h.ID == "" {
		return "", errors.New("pi: the first line is not a session header with an id")
	}
	return agentlog.SessionID(Name, h.ID), nil
}

// NewMapper starts a pass over one session file.
func (Format) NewMapper(string) agentlog.Mapper {
	return &mapper{before: map[string]uint64{}}
}

type mapper struct {
	header bool
	// version is the file's format version (0 before its header); lines
	// counts the lines mapped (migrate.go).
	version int
	lines   int
	// before is the last seq before each mapped entry's events: where a
	// compaction that keeps that entry ends.
	before map[string]uint64
	// leaf is the last entry: the one pi appends to, unless /tree moved
	// it.
	leaf string
}

// Decode parses the header or an entry, migrated to version 3 as pi
// does (migrate.go); an entry of a version 2 or 3 file must have an id.
func (m *mapper) Decode(raw []byte) (agentlog.Line, error) {
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return agentlog.Line{}, err
	}
	if probe.Type == typeSession {
		var h header
		if err := json.Unmarshal(raw, &h); err != nil {
			return agentlog.Line{}, err
		}
		m.sawHeader(&h)
		t, _ := time.Parse(time.RFC3339Nano, h.Timestamp)
		return agentlog.Line{Time: t, Value: &h}, nil
	}
	var e entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return agentlog.Line{}, err
	}
	if e.Type == "" || e.ID == "" && !m.chained() {
		return agentlog.Line{}, errors.New("pi: an entry without type or id")
	}
	m.migrate(&e)
	t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	return agentlog.Line{Key: e.ID, Time: t, Value: &e}, nil
}

// Map drives b with the steps of one line.
func (m *mapper) Map(b *agentlog.Builder, l agentlog.Line) {
	m.number(l.Value)
	switch v := l.Value.(type) {
	case *header:
		if m.header {
			b.Skip("a second session header")
			return
		}
		m.header = true
		b.Meta(agentlog.Meta{Labels: map[string]string{agentlog.LabelCwd: v.Cwd, LabelParentSession: v.ParentSession}})
		b.Skip("session header: session/created")
	case *entry:
		if p := v.parent(); m.leaf != "" && p != m.leaf && !m.chained() {
			// /tree moved the leaf: the model's context continues from
			// the entry this one is appended to (none known: the start).
			// A version 1 file's entries are a chain: each continues the
			// one before it.
			b.Rewind(p)
		}
		m.before[v.ID] = b.State().LastSeq
		m.leaf = v.ID
		m.entry(b, v)
	}
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func (m *mapper) entry(b *agentlog.Builder, e *entry) {
	switch e.Type {
	case typeMessage:
		if e.Message == nil {
			b.Skip("message entry without a message")
			return
		}
		m.message(b, e.Message)
	case typeCustomMessage:
		b.UserMessage(e.Content)
	case typeBranchSummary:
		if e.Summary == "" {
			b.Skip("empty branch summary")
			return
		}
		b.UserMessage(jsonString(branchSummaryPrefix + e.Summary + branchSummarySuffix))
	case typeCompaction:
		through := m.before[e.FirstKeptEntryID]
		if _, ok := m.before[e.FirstKeptEntryID]; ok && through == 0 {
			through = 1
		}
		b.CompactionThrough(through, e.Summary)
	case "model_change", "thinking_level_change", "label", "session_info", "custom":
		b.Skip(e.Type + ": not seen by the model")
	default:
		b.Skip("entry type " + e.Type + " is not mapped")
	}
}

func (m *mapper) message(b *agentlog.Builder, msg *message) {
	switch msg.Role {
	case roleUser:
		b.Prompt(msg.Content)
	case roleAssistant:
		a := agentlog.Assistant{Model: msg.Model, Usage: msg.Usage}
		if msg.Provider != "" && msg.Model != "" {
			a.Model = msg.Provider + "/" + msg.Model
		}
		var raws []json.RawMessage
		_ = json.Unmarshal(msg.Content, &raws)
		for _, raw := range raws {
			var bl block
			if json.Unmarshal(raw, &bl) != nil {
				continue
			}
			if bl.Type != "toolCall" {
				a.Content = append(a.Content, raw)
				continue
			}
			in := bl.Arguments
			if len(in) == 0 || string(in) == "null" {
				in = json.RawMessage("{}")
			}
			a.Calls = append(a.Calls, agentlog.ToolCall{ID: bl.ID, Name: bl.Name, Input: in})
		}
		switch msg.StopReason {
		case "toolUse":
			a.Stop = "tool_use"
		case "aborted", "error":
		default:
			a.Stop = "end_turn"
		}
		b.Assistant(a)
		if a.Stop == "" && len(a.Calls) == 0 {
			b.Interrupt()
		}
	case roleToolResult:
		b.ToolResult(msg.ToolCallID, msg.IsError, msg.Content)
	case roleBashExecution:
		if msg.ExcludeFromContext {
			b.Skip("bash execution excluded from the context (!!)")
			return
		}
		b.UserMessage(jsonString(bashExecutionText(msg)))
	case roleCustom:
		b.UserMessage(msg.Content)
	default:
		b.Skip("message role " + msg.Role + " is not mapped")
	}
}
