package pi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// exporter writes a pi session file from a session's mapped events: one
// linear chain of entries.
type exporter struct {
	w      *bufio.Writer
	err    error
	parent *string
	ids    map[string]bool
	// the assistant message being gathered (its tool calls follow it)
	asst    *message
	asstID  string
	asstAt  time.Time
	calls   []block
	names   map[string]string // call id -> tool name
	open    []string          // call ids without a result, in order
	entryOf map[uint64]string // seq -> id of the entry that holds it
	model   string
}

// entryID is an 8-hex id derived from an event id, unique in the file.
func (x *exporter) entryID(key string) string {
	for i := 0; ; i++ {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%d", key, i)
		id := fmt.Sprintf("%08x", h.Sum32())
		if !x.ids[id] {
			x.ids[id] = true
			return id
		}
	}
}

func iso(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (x *exporter) write(v any) {
	if x.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		x.err = err
		return
	}
	_, x.err = x.w.Write(append(b, '\n'))
}

// add writes an entry as the child of the previous one.
func (x *exporter) add(id string, t time.Time, typ string, fields map[string]any) {
	e := map[string]any{"type": typ, "id": id, "parentId": x.parent, "timestamp": iso(t)}
	for k, v := range fields {
		e[k] = v
	}
	x.write(e)
	p := id
	x.parent = &p
}

func (x *exporter) addMessage(id string, t time.Time, m *message) {
	m.Timestamp = t.UnixMilli()
	x.add(id, t, typeMessage, map[string]any{"message": m})
}

var zeroUsage = json.RawMessage(`{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}`)

// flush writes the gathered assistant message; stop is its stopReason
// when it has no tool calls.
func (x *exporter) flush(stop string) {
	if x.asst == nil {
		return
	}
	m := x.asst
	content := []block{}
	if t := m.Output; t != "" {
		content = append(content, block{Type: "text", Text: t})
	}
	content = append(content, x.calls...)
	m.Output = ""
	m.Content, _ = json.Marshal(content)
	m.StopReason = stop
	if len(x.calls) > 0 {
		m.StopReason = "toolUse"
	}
	x.addMessage(x.asstID, x.asstAt, m)
	x.asst, x.calls = nil, nil
}

func splitModel(model string) (provider, name string) {
	if p, n, ok := strings.Cut(model, "/"); ok {
		return p, n
	}
	return "sessionlog", model
}

func (x *exporter) event(e *schema.Envelope) {
	if e.Type != schema.TypeToolRequested && e.Type != schema.TypeToolStarted {
		stop := "stop"
		if e.Type == schema.TypeTurnEnded {
			var r schema.Reason
			_ = e.DecodeData(&r)
			if r.Reason != schema.TurnCompleted {
				stop = "aborted"
			}
		}
		x.flush(stop)
	}
	switch e.Type {
	case schema.TypeAttemptStarted:
		var a schema.AttemptStarted
		_ = e.DecodeData(&a)
		x.model = a.Model
	case schema.TypeMessageUser:
		var m schema.Message
		_ = e.DecodeData(&m)
		id := x.entryID(e.EventID)
		x.entryOf[e.Seq] = id
		content, _ := json.Marshal([]block{{Type: "text", Text: contentText(m.Content)}})
		x.addMessage(id, e.Time, &message{Role: roleUser, Content: content})
	case schema.TypeMessageAssistant:
		var m schema.Message
		_ = e.DecodeData(&m)
		provider, model := splitModel(x.model)
		usage := m.Usage
		if len(usage) == 0 {
			usage = zeroUsage
		}
		x.asstID = x.entryID(e.EventID)
		x.entryOf[e.Seq] = x.asstID
		x.asstAt = e.Time
		x.asst = &message{Role: roleAssistant, API: "sessionlog", Provider: provider, Model: model, Usage: usage, Output: contentText(m.Content)}
	case schema.TypeToolRequested:
		var r schema.ToolRequested
		_ = e.DecodeData(&r)
		if x.asst == nil {
			provider, model := splitModel(x.model)
			x.asstID, x.asstAt = x.entryID(e.EventID), e.Time
			x.asst = &message{Role: roleAssistant, API: "sessionlog", Provider: provider, Model: model, Usage: zeroUsage}
		}
		x.entryOf[e.Seq] = x.asstID
		x.calls = append(x.calls, block{Type: "toolCall", ID: e.ToolCallID, Name: r.Name, Arguments: r.Input})
		x.names[e.ToolCallID] = r.Name
		x.open = append(x.open, e.ToolCallID)
	case schema.TypeToolResult:
		var r schema.ToolResult
		_ = e.DecodeData(&r)
		id := x.entryID(e.EventID)
		x.entryOf[e.Seq] = id
		x.result(id, e.Time, e.ToolCallID, r.Status, contentText(r.Output))
	case schema.TypeCompactionEnded:
		var c schema.CompactionEnded
		_ = e.DecodeData(&c)
		id := x.entryID(e.EventID)
		kept := id
		for s := c.ThroughSeq + 1; s < e.Seq; s++ {
			if k, ok := x.entryOf[s]; ok {
				kept = k
				break
			}
		}
		x.add(id, e.Time, typeCompaction, map[string]any{"summary": c.Summary, "firstKeptEntryId": kept, "tokensBefore": 0})
	}
}

func (x *exporter) result(id string, t time.Time, call, status, output string) {
	name, ok := x.names[call]
	if !ok {
		return
	}
	delete(x.names, call)
	for i, c := range x.open {
		if c == call {
			x.open = append(x.open[:i], x.open[i+1:]...)
			break
		}
	}
	content, _ := json.Marshal([]block{{Type: "text", Text: output}})
	x.addMessage(id, t, &message{Role: roleToolResult, ToolCallID: call, ToolName: name, Content: content, IsError: status != schema.ToolOK})
}

// contentText is the text of message content or tool output.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []block
	if json.Unmarshal(raw, &bs) == nil {
		var parts []string
		for _, b := range bs {
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(raw)
}
