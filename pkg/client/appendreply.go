package client

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// appendReply decodes an append reply in the layout the writer writes
// (`{"sessionId":"…","firstSeq":N,"lastSeq":N,"streamSeq":N,
// "duplicate":B}` and an optional `,"hash":"…"` before the brace, no
// spaces) by hand: the reply of every append, which json.Unmarshal
// decoded by reflection at a visible share of the client's cost. Any
// other layout goes through json.Unmarshal, and so does one whose strings
// json.Unmarshal would read otherwise (escapes, control bytes, invalid
// UTF-8) or whose numbers are not plain uint64s.
type appendReply struct{ api.AppendReply }

func (r *appendReply) decodeReply(b []byte) error {
	if r.cut(b) {
		return nil
	}
	r.AppendReply = api.AppendReply{}
	return json.Unmarshal(b, &r.AppendReply)
}

// cut reads b in the writer's layout; false if b is not in it.
func (r *appendReply) cut(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte(`{"sessionId":`))
	if !ok {
		return false
	}
	if r.SessionID, rest, ok = cutPlainString(rest); !ok {
		return false
	}
	for _, f := range []struct {
		key string
		dst *uint64
	}{{`,"firstSeq":`, &r.FirstSeq}, {`,"lastSeq":`, &r.LastSeq}, {`,"streamSeq":`, &r.StreamSeq}} {
		if rest, ok = bytes.CutPrefix(rest, []byte(f.key)); !ok {
			return false
		}
		if *f.dst, rest, ok = cutUint(rest); !ok {
			return false
		}
	}
	switch {
	case bytes.HasPrefix(rest, []byte(`,"duplicate":true`)):
		r.Duplicate, rest = true, rest[len(`,"duplicate":true`):]
	case bytes.HasPrefix(rest, []byte(`,"duplicate":false`)):
		r.Duplicate, rest = false, rest[len(`,"duplicate":false`):]
	default:
		return false
	}
	r.Hash = ""
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"hash":`)); ok {
		if r.Hash, rest, ok = cutPlainString(rest); !ok {
			return false
		}
	}
	return string(rest) == "}"
}

// cutPlainString reads the JSON string b starts with when json.Unmarshal
// reads it as its bytes between the quotes (no escape, no control byte,
// valid UTF-8), and returns it and what follows it.
func cutPlainString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	i := bytes.IndexByte(b[1:], '"')
	if i < 0 {
		return "", nil, false
	}
	s := b[1 : 1+i]
	ascii := true
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return "", nil, false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii && !utf8.Valid(s) {
		return "", nil, false
	}
	return string(s), b[2+i:], true
}

// cutUint reads the JSON number b starts with when it is a uint64 written
// as json.Marshal writes one (digits, no leading zero), and returns it
// and what follows it.
func cutUint(b []byte) (uint64, []byte, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && b[0] == '0') {
		return 0, nil, false
	}
	v, err := strconv.ParseUint(string(b[:n]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return v, b[n:], true
}
