package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

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

// Compaction reads the summary of session id's last ended compaction as
// the snapshot sees it (nil: none).
func (s Snapshot) Compaction(id string) (*CompactionSummary, error) {
	return getJSON[CompactionSummary](s, CompactionKey(id))
}

// StreamSeq reads the stream seq of event seq of session id from the
// event index (0: the index holds no such event).
func (s Snapshot) StreamSeq(id string, seq uint64) (uint64, error) {
	v, closer, err := s.s.Get(EventKey(id, seq))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ss, _ := DecodeEventValue(v)
	return ss, closer.Close()
}

// LastEvent reads the last event of session id the index holds at or
// before seq: its seq and stream seq (both 0: none).
func (s Snapshot) LastEvent(id string, seq uint64) (at, streamSeq uint64, err error) {
	it, err := s.Iter(EventPrefix(id))
	if err != nil {
		return 0, 0, err
	}
	var ok bool
	if seq < ^uint64(0) {
		ok = it.SeekLT(EventKey(id, seq+1))
	} else {
		ok = it.Last()
	}
	if ok {
		at = EventSeq(it.Key())
		streamSeq, _ = DecodeEventValue(it.Value())
	}
	return at, streamSeq, it.Close()
}

// StreamSeqs reads the stream seqs of session id's indexed events from
// seq from through seq last, in seq order, at most limit of them; more
// says the index holds one more in the range.
func (s Snapshot) StreamSeqs(id string, from, last uint64, limit int) (seqs []uint64, more bool, err error) {
	it, err := s.Iter(EventPrefix(id))
	if err != nil {
		return nil, false, err
	}
	return streamSeqs(it, id, from, last, limit)
}

// StreamSeqs reads the stream seqs of session id's indexed events from
// seq from through seq last, in seq order, as the committed store holds
// them (a restore reads the events after a session's snapshot by them).
func (d *DB) StreamSeqs(id string, from, last uint64) ([]uint64, error) {
	it, err := d.Iter(EventPrefix(id))
	if err != nil {
		return nil, err
	}
	seqs, _, err := streamSeqs(it, id, from, last, -1)
	return seqs, err
}

// streamSeqs is StreamSeqs on an iterator of session id's event index,
// which it closes (limit < 0: no limit).
func streamSeqs(it Iterator, id string, from, last uint64, limit int) (seqs []uint64, more bool, err error) {
	for ok := it.SeekGE(EventKey(id, from)); ok && EventSeq(it.Key()) <= last; ok = it.Next() {
		if len(seqs) == limit {
			more = true
			break
		}
		ss, _ := DecodeEventValue(it.Value())
		seqs = append(seqs, ss)
	}
	return seqs, more, it.Close()
}

// ContextPage reads session id's context entries from seq from through
// seq last, in seq order, at most about limit bytes of them (the page
// ends at the first entry past limit bytes), leaving out those whose seq
// skip reports (asked in seq order, of the model-visible events alone)
// and the rewinds. next is where the following page starts, 0 when this
// is the last.
func (s Snapshot) ContextPage(id string, from, last uint64, limit int, skip func(seq uint64) bool) (entries []ContextEntry, next uint64, err error) {
	it, err := s.Iter(EventPrefix(id))
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	size := 0
	for ok := it.SeekGE(EventKey(id, from)); ok; ok = it.Next() {
		seq := EventSeq(it.Key())
		if seq > last {
			return entries, 0, nil
		}
		if size >= limit {
			return entries, seq, nil
		}
		_, e := DecodeEventValue(it.Value())
		if len(e) == 0 || skip(seq) {
			continue
		}
		var ce ContextEntry
		if err := json.Unmarshal(e, &ce); err != nil {
			return nil, 0, err
		}
		if ce.Type == schema.TypeContextRewound {
			continue
		}
		entries = append(entries, ce)
		size += len(e)
	}
	return entries, 0, nil
}

// Rewound is the open range (After, Before) of the seqs a context/rewound
// at seq Before abandoned: it took the context back to what it was right
// after the event at seq After.
type Rewound struct{ After, Before uint64 }

// rewoundType is how a context/rewound shows in a stored context entry.
var rewoundType = []byte(`"` + schema.TypeContextRewound + `"`)

// Abandoned reads the ranges of session id's seqs from..last that the
// rewinds it holds by seq last abandoned, in seq order: a model-visible
// event in one is not in the context. The index is read backwards from
// last: what stands at the end is the chain of the context's changes
// back from there, and a rewind sends that chain to the context after
// its toSeq, over everything in between (the rewinds there included).
// The ranges are few (at most one per rewind): the context itself is
// never held.
func (s Snapshot) Abandoned(id string, from, last uint64) (out []Rewound, err error) {
	if last == 0 || last < from {
		return nil, nil
	}
	it, err := s.Iter(EventPrefix(id))
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.SeekLT(EventKey(id, last+1)); ok; ok = it.Prev() {
		seq := EventSeq(it.Key())
		if seq < from {
			break
		}
		if n := len(out); n > 0 && seq > out[n-1].After {
			continue
		}
		_, e := DecodeEventValue(it.Value())
		if !bytes.Contains(e, rewoundType) {
			continue
		}
		var ce ContextEntry
		if err := json.Unmarshal(e, &ce); err != nil {
			return nil, err
		}
		if ce.Type != schema.TypeContextRewound {
			continue
		}
		var d schema.ContextRewound
		if err := json.Unmarshal(ce.Data, &d); err != nil {
			return nil, err
		}
		if d.ToSeq < seq {
			out = append(out, Rewound{After: d.ToSeq, Before: seq})
		}
	}
	slices.Reverse(out)
	return out, nil
}
