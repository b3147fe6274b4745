package store

import (
	"encoding/binary"
	"encoding/json"
	"strconv"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The event index value (at EventKey): the event's stream sequence (8
// bytes big endian) followed, for model-visible events, by the context
// entry JSON. The compaction value (at CompactionKey) is a
// CompactionSummary as JSON.

// AppendEventValue appends the index value of event e to dst. canonical
// says e was decoded from a canonical body (schema.DecodeCanonical), whose
// data is as json.Marshal writes it (see appendContextEntryOf).
func AppendEventValue(dst []byte, streamSeq uint64, e *schema.Envelope, canonical bool) []byte {
	dst = binary.BigEndian.AppendUint64(dst, streamSeq)
	return appendContextEntryOf(dst, e, canonical)
}

// DecodeEventValue splits an event index value into the event's stream
// sequence and its context entry (empty: the model does not see it; both
// zero: the value is too short).
func DecodeEventValue(v []byte) (streamSeq uint64, entry []byte) {
	if len(v) < 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), v[8:]
}

// ContextEntry is one model-visible item of the context view.
type ContextEntry struct {
	Seq        uint64          `json:"seq"`
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	TurnID     string          `json:"turnId,omitempty"`
	AttemptID  string          `json:"attemptId,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Synthetic  bool            `json:"synthetic,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// ContextRole says which events the model sees, and as whom. Attempts,
// turns, approvals and bookkeeping are not part of the transcript.
func ContextRole(typ string) string {
	switch typ {
	case schema.TypeMessageUser:
		return "user"
	case schema.TypeMessageAssistant:
		return "assistant"
	case schema.TypeToolRequested:
		return "tool_call"
	case schema.TypeToolResult:
		return "tool_result"
	case schema.TypeContextRewound:
		// Not shown to the model: indexed so the context view can drop
		// what it abandoned.
		return "rewind"
	}
	return ""
}

// appendContextEntry appends the context entry of e to dst (nothing for an
// event the model does not see). The usual entry is
// written by hand: its ids and type are plain ASCII, and its data as
// stored is already what json.Marshal makes of a RawMessage (compact, with
// <, >, & and U+2028/U+2029 escaped), so both are copied as they are.
// Anything else goes through json.Marshal.
func appendContextEntry(dst []byte, e *schema.Envelope) []byte {
	return appendContextEntryOf(dst, e, false)
}

// appendContextEntryOf is appendContextEntry for an event whose data is
// known to be as json.Marshal writes it (dataAsIs), which it then does not
// scan again: the data of a canonical body is what schema.Encode wrote,
// which is json.Marshal's (or checked to be it), so the scan of every
// model-visible event's data (a tenth of a fold's instructions besides
// the hash) answers what the decode answered already.
func appendContextEntryOf(dst []byte, e *schema.Envelope, dataAsIs bool) []byte {
	role, data := contextOf(e)
	if role == "" {
		return dst
	}
	if !plainString(e.Type) || !plainString(e.TurnID) || !plainString(e.AttemptID) || !plainString(e.ToolCallID) || !(dataAsIs || marshalsAsIs(data)) {
		return append(dst, marshalContextEntry(e, role, data)...)
	}
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = appendMember(dst, "type", e.Type)
	dst = appendMember(dst, "role", role)
	if e.TurnID != "" {
		dst = appendMember(dst, "turnId", e.TurnID)
	}
	if e.AttemptID != "" {
		dst = appendMember(dst, "attemptId", e.AttemptID)
	}
	if e.ToolCallID != "" {
		dst = appendMember(dst, "toolCallId", e.ToolCallID)
	}
	if e.Synthetic {
		dst = append(dst, `,"synthetic":true`...)
	}
	dst = append(dst, `,"data":`...)
	dst = append(dst, data...)
	return append(dst, '}')
}

// appendMember appends ,"key":"value" for a plainString value.
func appendMember(dst []byte, key, value string) []byte {
	dst = append(append(append(dst, `,"`...), key...), `":"`...)
	return append(append(dst, value...), '"')
}

// plainString reports whether json.Marshal writes s as it is between
// quotes: printable ASCII but for the quote, the backslash and the
// characters it escapes for HTML.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// marshalsAsIs reports whether json.Marshal writes the valid JSON value v
// unchanged as a RawMessage: no whitespace outside strings, and none of
// <, >, & or U+2028/U+2029 inside them.
func marshalsAsIs(v []byte) bool {
	in := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !in {
			switch c {
			case ' ', '\t', '\n', '\r':
				return false
			case '"':
				in = true
			}
			continue
		}
		switch c {
		case '\\':
			i++
		case '"':
			in = false
		case '<', '>', '&':
			return false
		case 0xE2:
			if i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xA8 || v[i+2] == 0xA9) {
				return false
			}
		}
	}
	return true
}

// contextOf is the role and data of e's context entry (role "": the model
// does not see e).
func contextOf(e *schema.Envelope) (role string, data json.RawMessage) {
	data = e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return ContextRole(e.Type), data
}

// marshalContextEntry is the context entry of e by json.Marshal.
func marshalContextEntry(e *schema.Envelope, role string, data json.RawMessage) []byte {
	b, _ := json.Marshal(ContextEntry{Seq: e.Seq, Type: e.Type, Role: role, TurnID: e.TurnID, AttemptID: e.AttemptID, ToolCallID: e.ToolCallID, Synthetic: e.Synthetic, Data: data})
	return b
}

// CompactionSummary is the stored summary of the last ended compaction.
type CompactionSummary struct {
	CompactionID string `json:"compactionId"`
	ThroughSeq   uint64 `json:"throughSeq"`
	EndSeq       uint64 `json:"endSeq"`
	Summary      string `json:"summary"`
}
