package claudecode

import (
	"bufio"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Export writes the session as a Claude Code file: the source lines as
// they were, then what happened after them in Claude Code's shape, then an
// error result for every call left without one, so `claude --resume`
// never meets a tool_use without its tool_result; unless nothing follows
// the source lines (agentlog.Export.Extended): the file as it was. It
// reads the session as it writes, holding the calls still open.
func (Format) Export(w io.Writer, x *agentlog.Export) error {
	session, err := sourceSession(x)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	e := &exporter{w: bw, x: x, session: session}
	e.clock.At = x.FirstTime()
	err = x.EachLine(func(l json.RawMessage) error {
		e.raw(l)
		var h struct {
			UUID string `json:"uuid"`
		}
		if json.Unmarshal(l, &h) == nil && h.UUID != "" {
			e.parent = h.UUID
		}
		return e.err
	})
	if err != nil {
		return err
	}
	// The calls of a message the file cut off never reached sessionlog's
	// events, so nothing after the file answers them: when something
	// follows, they are answered first (a tool_use is followed by its
	// tool_result).
	extended := x.Extended()
	if extended {
		for _, c := range e.uses.List() {
			if x.State.Tools[agentlog.ItemID(c.ID)] == nil {
				e.result(c.ID, agentlog.RepairNote(""), true, x.State.LastSeq+1+uint64(c.N), time.Time{})
			}
		}
	}
	err = x.EachEvent(func(ev *schema.Envelope) error {
		e.event(ev)
		return e.err
	})
	if err != nil {
		return err
	}
	e.flushAssistant()
	// Every tool_use written (the source's lines included: a message cut
	// off before its calls reached sessionlog's events) gets a result.
	if extended {
		for _, c := range e.uses.List() {
			e.result(c.ID, agentlog.RepairNote(""), true, x.State.LastSeq+1+uint64(c.N), time.Time{})
		}
	}
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

// sourceSession is the Claude Code session id the lines carry: the one
// of the first source line that has one, else the sessionlog id's own
// (cc-<uuid>), else a UUID made from the sessionlog id.
func sourceSession(x *agentlog.Export) (string, error) {
	var id string
	err := x.EachLine(func(l json.RawMessage) error {
		var h struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(l, &h) == nil && h.SessionID != "" {
			id = h.SessionID
			return agentlog.ErrStop
		}
		return nil
	})
	if err != nil || id != "" {
		return id, err
	}
	if s, ok := strings.CutPrefix(x.SessionID, Prefix+"-"); ok && len(s) == 36 {
		return s, nil
	}
	return uuidOf(x.SessionID), nil
}

// uuidOf is a stable UUID-shaped id made from s.
func uuidOf(s string) string {
	h := sha1.Sum([]byte(s))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

type exporter struct {
	w       *bufio.Writer
	x       *agentlog.Export
	session string
	parent  string
	err     error
	// the assistant message waiting for its tool calls
	asst      *schema.Envelope
	asstCalls []json.RawMessage
	// models are the models of the open turn's attempts (attempt id ->
	// model): a message names an attempt of its own turn.
	models map[string]string
	// uses are the tool_use ids written that have no tool_result yet.
	uses  agentlog.OpenCalls
	clock agentlog.Clock
}

// track notes the tool calls and results of a written line.
func (e *exporter) track(line []byte) {
	var l struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &l) != nil {
		return
	}
	var blocks []block
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			if b.ID != "" {
				e.uses.Request(b.ID)
			}
		case "tool_result":
			e.uses.Answer(b.ToolUseID)
		}
	}
}

func (e *exporter) raw(b []byte) {
	if e.err != nil {
		return
	}
	e.track(b)
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return
	}
	e.err = e.w.WriteByte('\n')
}

// line writes a user, assistant or system line with the common fields,
// at at (or the last known time before it); version is Claude Code's,
// so only a session from Claude Code has one.
func (e *exporter) line(seq uint64, n int, at time.Time, typ string, fields map[string]any) {
	id := uuidOf(fmt.Sprintf("%s/%d/%d", e.x.SessionID, seq, n))
	l := map[string]any{
		"parentUuid":  nullable(e.parent),
		"isSidechain": false,
		"userType":    "external",
		"cwd":         e.x.Meta.Labels[agentlog.LabelCwd],
		"sessionId":   e.session,
		"gitBranch":   e.x.Meta.Labels[agentlog.LabelGitBranch],
		"type":        typ,
		"uuid":        id,
		"timestamp":   e.clock.Tick(at).UTC().Format("2006-01-02T15:04:05.000Z"),
	}
	if v := e.x.Meta.Labels[agentlog.LabelVersion]; v != "" && e.x.Meta.Agent == Name {
		l["version"] = v
	}
	for k, v := range fields {
		l[k] = v
	}
	b, err := json.Marshal(l)
	if err != nil {
		e.err = err
		return
	}
	e.raw(b)
	e.parent = id
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (e *exporter) event(ev *schema.Envelope) {
	switch ev.Type {
	case schema.TypeMessageUser, schema.TypeMessageAssistant, schema.TypeToolResult, schema.TypeTurnEnded, schema.TypeCompactionEnded:
		e.flushAssistant() // the calls of the message are all in
	}
	switch ev.Type {
	case schema.TypeAttemptStarted:
		var d schema.AttemptStarted
		_ = ev.DecodeData(&d)
		if e.models == nil {
			e.models = map[string]string{}
		}
		e.models[ev.AttemptID] = d.Model
	case schema.TypeMessageUser:
		var d schema.Message
		_ = ev.DecodeData(&d)
		e.line(ev.Seq, 0, ev.Time, "user", map[string]any{"message": map[string]any{"role": "user", "content": e.content(d.Content)}})
	case schema.TypeMessageAssistant:
		c := *ev
		e.asst, e.asstCalls = &c, nil
	case schema.TypeToolRequested:
		var d schema.ToolRequested
		_ = ev.DecodeData(&d)
		b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": ev.ToolCallID, "name": d.Name, "input": d.Input})
		if e.asst == nil { // a call with no message before it
			e.asst = &schema.Envelope{Seq: ev.Seq, Time: ev.Time, AttemptID: "call-" + ev.ToolCallID, Data: json.RawMessage(`{"content":[]}`)}
		}
		e.asstCalls = append(e.asstCalls, b)
	case schema.TypeToolResult:
		var d schema.ToolResult
		_ = ev.DecodeData(&d)
		switch d.Status {
		case schema.ToolOK, schema.ToolError:
			out := d.Output
			if len(out) == 0 {
				out = json.RawMessage(`""`)
			}
			e.result(ev.ToolCallID, e.content(out), d.Status == schema.ToolError, ev.Seq, ev.Time)
		default:
			e.result(ev.ToolCallID, agentlog.RepairNote(d.Status), true, ev.Seq, ev.Time)
		}
	case schema.TypeTurnEnded:
		clear(e.models) // nothing names the turn's attempts again
		// No line: Claude Code's "[Request interrupted by user]" is a
		// message the model reads (the import maps it to message/user, as
		// getSessionMessages returns it), so a session's own interruption
		// is already its message/user, and one written for a turn that
		// ended otherwise (a new prompt, codex's turn_aborted) would add a
		// message the session's model never read.
	case schema.TypeCompactionEnded:
		var d schema.CompactionEnded
		_ = ev.DecodeData(&d)
		boundary := e.parent
		e.parent = ""
		e.line(ev.Seq, 0, ev.Time, "system", map[string]any{"subtype": "compact_boundary", "content": "Conversation compacted",
			"isMeta": false, "level": "info", "logicalParentUuid": boundary, "compactMetadata": map[string]any{"trigger": "manual"}})
		e.line(ev.Seq, 1, ev.Time, "user", map[string]any{"message": map[string]any{"role": "user", "content": d.Summary},
			"isCompactSummary": true, "isVisibleInTranscriptOnly": true})
	}
}

// flushAssistant writes the pending assistant message with its calls.
func (e *exporter) flushAssistant() {
	a := e.asst
	if a == nil {
		return
	}
	e.asst = nil
	var d schema.Message
	_ = a.DecodeData(&d)
	var content []json.RawMessage
	if json.Unmarshal(e.content(d.Content), &content) != nil {
		t, _ := json.Marshal(map[string]string{"type": "text", "text": agentlog.TextOf(d.Content)})
		content = []json.RawMessage{t}
	}
	content = append(content, e.asstCalls...)
	stop := "end_turn"
	if len(e.asstCalls) > 0 {
		stop = "tool_use"
	}
	msg := map[string]any{"id": "msg_" + strings.ReplaceAll(a.AttemptID, ".", "_"), "type": "message", "role": "assistant",
		"model": e.model(a), "content": content, "stop_reason": stop, "stop_sequence": nil}
	if u := e.usage(d.Usage); u != nil {
		msg["usage"] = u
	}
	e.line(a.Seq, 0, a.Time, "assistant", map[string]any{"message": msg})
}

// model is the model the attempt named (without pi's provider), else
// the name Claude Code gives the model of a message it made itself.
func (e *exporter) model(a *schema.Envelope) string {
	if _, m := agentlog.ProviderOf(e.models[a.AttemptID], e.x.Meta); m != "" {
		return m
	}
	return "<synthetic>"
}

// usage is a message's usage in Claude Code's shape (nil: none).
func (e *exporter) usage(raw json.RawMessage) any {
	if e.x.Meta.Agent == Name && len(raw) > 0 {
		return raw
	}
	t, ok := agentlog.UsageTokens(raw)
	if !ok {
		return nil
	}
	return map[string]int64{"input_tokens": t.Input, "output_tokens": t.Output, "cache_read_input_tokens": t.CacheRead,
		"cache_creation_input_tokens": t.CacheWrite}
}

// content is message content in Claude Code's shape: a Claude Code
// session's as it is; another agent's blocks as Claude Code's text,
// thinking and image blocks (the text of any other block that has one as
// a text block; one without text left out). A string stays a string.
func (e *exporter) content(raw json.RawMessage) json.RawMessage {
	var blocks []json.RawMessage
	if e.x.Meta.Agent == Name || json.Unmarshal(raw, &blocks) != nil {
		return raw
	}
	out := make([]any, 0, len(blocks))
	for _, b := range blocks {
		var bl struct {
			Type              string `json:"type"`
			Text              string `json:"text"`
			Thinking          string `json:"thinking"`
			ThinkingSignature string `json:"thinkingSignature"`
			Data              string `json:"data"`
			MimeType          string `json:"mimeType"`
		}
		if json.Unmarshal(b, &bl) != nil {
			continue
		}
		switch {
		case bl.Type == "thinking":
			out = append(out, map[string]string{"type": "thinking", "thinking": bl.Thinking, "signature": bl.ThinkingSignature})
		case bl.Type == "image" && bl.Data != "":
			out = append(out, map[string]any{"type": "image", "source": map[string]string{"type": "base64", "media_type": bl.MimeType, "data": bl.Data}})
		case bl.Text != "":
			out = append(out, map[string]string{"type": "text", "text": bl.Text})
		}
	}
	c, _ := json.Marshal(out)
	return c
}

// result writes a tool_result line; output is its content (a string or
// raw JSON).
func (e *exporter) result(callID string, output any, isError bool, seq uint64, at time.Time) {
	e.line(seq, 1, at, "user", map[string]any{"message": map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": callID, "content": output, "is_error": isError},
	}}})
}
