package pi

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Export writes x as a pi session file: the source lines as they are,
// then the events that follow them as a chain of entries from the last
// one (all events for a session from elsewhere, after a header), then an
// error result for every call still without one, unless nothing follows
// the source lines (agentlog.Export.Extended): the file as it was. It
// reads the session as it writes, holding the names of the calls still
// open, the compactions' kept entries and the file's entry ids (4 bytes
// each: idSet).
func (Format) Export(w io.Writer, x *agentlog.Export) error {
	bw := bufio.NewWriter(w)
	ex := &exporter{w: bw, meta: x.Meta, names: map[string]string{}}
	ex.clock.At = x.FirstTime()
	err := x.EachLine(func(l json.RawMessage) error {
		ex.raw(l)
		ex.learn(l)
		return ex.err
	})
	if err != nil {
		return err
	}
	if x.Lines == 0 {
		ex.write(header{Type: typeSession, Version: currentVersion, ID: SessionUUID(x.SessionID), Timestamp: iso(ex.clock.At),
			Cwd: x.Meta.Labels[agentlog.LabelCwd], ParentSession: x.Meta.Labels[LabelParentSession]})
	}
	ex.kept = newKeptEntries(x.Compactions())
	err = x.EachEvent(func(e *schema.Envelope) error {
		ex.event(e)
		return ex.err
	})
	if err != nil {
		return err
	}
	ex.flush("stop")
	if x.Extended() {
		for _, t := range x.Unanswered() {
			ex.result(ex.entryID("unanswered/"+t.ID), time.Time{}, t.ID, t.Name, "", nil)
		}
	}
	if ex.err != nil {
		return ex.err
	}
	return bw.Flush()
}

// keptEntries finds the first kept entry of each compaction as the
// entries are written: the first one that holds an event after the last
// one the compaction replaces and before the compaction.
type keptEntries struct {
	byThrough []agentlog.Compaction // by ThroughSeq, not yet reached
	active    []agentlog.Compaction // reached, without a kept entry yet
	kept      map[uint64]string     // compaction seq -> its first kept entry
}

func newKeptEntries(cs []agentlog.Compaction) *keptEntries {
	k := &keptEntries{byThrough: slices.Clone(cs), kept: map[uint64]string{}}
	sort.SliceStable(k.byThrough, func(a, b int) bool { return k.byThrough[a].ThroughSeq < k.byThrough[b].ThroughSeq })
	return k
}

// entry notes that the entry id holds the event at seq.
func (k *keptEntries) entry(seq uint64, id string) {
	for len(k.byThrough) > 0 && k.byThrough[0].ThroughSeq < seq {
		k.active = append(k.active, k.byThrough[0])
		k.byThrough = k.byThrough[1:]
	}
	for _, c := range k.active {
		if seq < c.Seq {
			k.kept[c.Seq] = id
		}
	}
	k.active = k.active[:0]
}

// of is the first kept entry of the compaction at seq ("": none).
func (k *keptEntries) of(seq uint64) string {
	id := k.kept[seq]
	delete(k.kept, seq)
	return id
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// SessionUUID is the pi session id of a session: the id it was imported
// with, else a UUID derived from the session id.
func SessionUUID(sessionID string) string {
	if id, ok := strings.CutPrefix(sessionID, Name+"-"); ok && uuidRE.MatchString(id) {
		return id
	}
	h := sha256.Sum256([]byte(sessionID))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// exporter writes pi entries, each the child of the one before.
type exporter struct {
	w      *bufio.Writer
	err    error
	meta   schema.SessionCreated
	parent *string
	// ids are the file's entry ids that an id entryID makes could meet:
	// 8 hex digits, as a number. pi finds an entry by its id in the whole
	// file, so each is new to it: the one thing an export holds per entry.
	ids   idSet
	names map[string]string // open call id -> tool name
	kept  *keptEntries
	model string // the current attempt's, as agentlog maps it
	// api is the api of the source's last assistant message, for the
	// provider/model it names (apiModel)
	api, apiModel string
	clock         agentlog.Clock
	// the assistant message being gathered: its tool calls follow it
	asst *assistantOut
}

type assistantOut struct {
	id      string
	at      time.Time
	content []json.RawMessage
	usage   json.RawMessage
	model   string
}

func (x *exporter) raw(b []byte) {
	if x.err == nil {
		_, x.err = x.w.Write(append(append([]byte(nil), b...), '\n'))
	}
}

func (x *exporter) write(v any) {
	b, err := json.Marshal(v)
	if err != nil && x.err == nil {
		x.err = err
	}
	x.raw(b)
}

// learn notes what a source line says that later entries need: its id
// (the next entry's parent; a version 1 entry has none, and pi chains
// what follows it in file order), tool names, the model and its api.
func (x *exporter) learn(raw json.RawMessage) {
	var e entry
	if json.Unmarshal(raw, &e) != nil || e.Type == typeSession {
		return
	}
	if e.ID != "" {
		x.noteID(e.ID)
		id := e.ID
		x.parent = &id
	}
	if t, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
		x.clock.Tick(t)
	}
	if e.Message != nil && e.Message.Role == roleAssistant {
		x.model = e.Message.Provider + "/" + e.Message.Model
		x.api, x.apiModel = e.Message.API, x.model
		for _, bl := range blocks(e.Message.Content) {
			if bl.Type == "toolCall" {
				x.names[bl.ID] = bl.Name
			}
		}
	}
	if e.Message != nil && e.Message.Role == roleToolResult {
		delete(x.names, e.Message.ToolCallID)
	}
}

// entryID is an 8-hex id derived from an event id, unique in the file.
func (x *exporter) entryID(key string) string {
	for i := 0; ; i++ {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%d", key, i)
		if !x.ids.has(h.Sum32()) {
			x.ids.add(h.Sum32())
			return fmt.Sprintf("%08x", h.Sum32())
		}
	}
}

// noteID notes an entry id of the file: one of 8 lowercase hex digits is
// one entryID could make.
func (x *exporter) noteID(id string) {
	if len(id) != 8 || strings.ToLower(id) != id {
		return
	}
	if n, err := strconv.ParseUint(id, 16, 32); err == nil {
		x.ids.add(uint32(n))
	}
}

func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// add writes an entry as the child of the previous one, at t (or the
// last known time before it).
func (x *exporter) add(id string, t time.Time, typ string, fields map[string]any) {
	e := map[string]any{"type": typ, "id": id, "parentId": x.parent, "timestamp": iso(x.clock.Tick(t))}
	for k, v := range fields {
		e[k] = v
	}
	x.write(e)
	x.parent = &id
}

func (x *exporter) addMessage(id string, t time.Time, m map[string]any) {
	m["timestamp"] = x.clock.Tick(t).UnixMilli()
	x.add(id, t, typeMessage, map[string]any{"message": m})
}

const zeroCost = `{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}`

var zeroUsage = json.RawMessage(`{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":` + zeroCost + `}`)

// gather starts an assistant message (once per attempt).
func (x *exporter) gather(id string, t time.Time, content []json.RawMessage, usage json.RawMessage) {
	x.asst = &assistantOut{id: id, at: t, content: content, usage: usage, model: x.model}
}

// flush writes the gathered assistant message; stop is its stopReason
// when it has no tool calls.
func (x *exporter) flush(stop string) {
	a := x.asst
	if a == nil {
		return
	}
	x.asst = nil
	calls := false
	for _, c := range a.content {
		var bl block
		if json.Unmarshal(c, &bl) == nil && bl.Type == "toolCall" {
			calls = true
		}
	}
	if calls {
		stop = "toolUse"
	}
	content := a.content
	if content == nil {
		content = []json.RawMessage{}
	}
	m := map[string]any{"role": roleAssistant, "content": content, "usage": x.usage(a.usage), "stopReason": stop}
	// The model and provider the session recorded, with the api pi names
	// for them; left out when the session does not say (pi then resumes
	// with its default model).
	provider, model := agentlog.ProviderOf(a.model, x.meta)
	if model != "" {
		m["model"] = model
	}
	if provider != "" {
		m["provider"] = provider
		if api := x.apiOf(provider, model); api != "" {
			m["api"] = api
		}
	}
	x.addMessage(a.id, a.at, m)
}

// apis are the apis pi uses for the providers of other agents' sessions.
var apis = map[string]string{"anthropic": "anthropic-messages", "openai": "openai-responses"}

// apiOf is the api of provider/model: the source's when its last
// assistant message named the same model.
func (x *exporter) apiOf(provider, model string) string {
	if x.apiModel == provider+"/"+model && x.api != "" {
		return x.api
	}
	return apis[provider]
}

// usage is a message's usage in pi's shape: pi's own as it is, another
// agent's counts converted, zeros when there are none.
func (x *exporter) usage(raw json.RawMessage) json.RawMessage {
	if x.meta.Agent == Name && len(raw) > 0 && json.Valid(raw) {
		return raw
	}
	t, ok := agentlog.UsageTokens(raw)
	if !ok {
		return zeroUsage
	}
	b, _ := json.Marshal(map[string]any{"input": t.Input, "output": t.Output, "cacheRead": t.CacheRead, "cacheWrite": t.CacheWrite,
		"totalTokens": t.Input + t.Output + t.CacheRead + t.CacheWrite, "cost": json.RawMessage(zeroCost)})
	return b
}

// blocks is content as pi blocks: a string becomes one text block; the
// blocks of a pi session are kept as they are, another agent's become
// pi's text, thinking and image blocks (the text of any other block that
// has one becomes a text block; one without text is left out).
func (x *exporter) blocks(content json.RawMessage) []json.RawMessage {
	var s string
	if json.Unmarshal(content, &s) == nil {
		b, _ := json.Marshal(block{Type: "text", Text: s})
		return []json.RawMessage{b}
	}
	var raws []json.RawMessage
	if json.Unmarshal(content, &raws) != nil {
		b, _ := json.Marshal(block{Type: "text", Text: string(content)})
		return []json.RawMessage{b}
	}
	if x.meta.Agent == Name {
		return raws
	}
	out := make([]json.RawMessage, 0, len(raws))
	for _, raw := range raws {
		if b := foreignBlock(raw); b != nil {
			out = append(out, b)
		}
	}
	return out
}

// foreignBlock is a content block of another agent as a pi block, nil
// when it has nothing pi holds.
func foreignBlock(raw json.RawMessage) json.RawMessage {
	var bl struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Source    *struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	if json.Unmarshal(raw, &bl) != nil {
		return nil
	}
	var v any
	switch {
	case bl.Type == "thinking":
		v = map[string]any{"type": "thinking", "thinking": bl.Thinking, "thinkingSignature": bl.Signature}
		if bl.Signature == "" {
			v = map[string]any{"type": "thinking", "thinking": bl.Thinking}
		}
	case bl.Type == "image" && bl.Source != nil && bl.Source.Type == "base64":
		v = block{Type: "image", Data: bl.Source.Data, MimeType: bl.Source.MediaType}
	case bl.Text != "":
		v = block{Type: "text", Text: bl.Text}
	default:
		return nil
	}
	b, _ := json.Marshal(v)
	return b
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
		x.kept.entry(e.Seq, id)
		x.addMessage(id, e.Time, map[string]any{"role": roleUser, "content": x.blocks(m.Content)})
	case schema.TypeMessageAssistant:
		var m schema.Message
		_ = e.DecodeData(&m)
		id := x.entryID(e.EventID)
		x.kept.entry(e.Seq, id)
		var content []json.RawMessage
		for _, c := range x.blocks(m.Content) {
			var bl block
			if json.Unmarshal(c, &bl) == nil && bl.Type == "text" && bl.Text == "" {
				continue
			}
			content = append(content, c)
		}
		x.gather(id, e.Time, content, m.Usage)
	case schema.TypeToolRequested:
		var r schema.ToolRequested
		_ = e.DecodeData(&r)
		if x.asst == nil {
			id := x.entryID(e.EventID)
			x.gather(id, e.Time, nil, nil)
		}
		x.kept.entry(e.Seq, x.asst.id)
		bl, _ := json.Marshal(block{Type: "toolCall", ID: e.ToolCallID, Name: r.Name, Arguments: r.Input})
		x.asst.content = append(x.asst.content, bl)
		x.names[e.ToolCallID] = r.Name
	case schema.TypeToolResult:
		var r schema.ToolResult
		_ = e.DecodeData(&r)
		id := x.entryID(e.EventID)
		x.kept.entry(e.Seq, id)
		x.result(id, e.Time, e.ToolCallID, x.names[e.ToolCallID], r.Status, r.Output)
		delete(x.names, e.ToolCallID)
	case schema.TypeCompactionEnded:
		var c schema.CompactionEnded
		_ = e.DecodeData(&c)
		id := x.entryID(e.EventID)
		kept := x.kept.of(e.Seq)
		if kept == "" {
			kept = id // nothing kept: pi finds no kept entry before the compaction
		}
		x.add(id, e.Time, typeCompaction, map[string]any{"summary": c.Summary, "firstKeptEntryId": kept, "tokensBefore": 0})
	}
}

// result writes a toolResult; a status other than ok is an error, and a
// call whose outcome is not known says so.
func (x *exporter) result(id string, t time.Time, call, name, status string, output json.RawMessage) {
	content := x.blocks(output)
	if status != schema.ToolOK && status != schema.ToolError {
		content = x.blocks(jsonString(agentlog.RepairNote(status)))
	}
	x.addMessage(id, t, map[string]any{"role": roleToolResult, "toolCallId": call, "toolName": name, "content": content, "isError": status != schema.ToolOK})
}
