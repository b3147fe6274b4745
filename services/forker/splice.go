package forker

import (
	"bytes"
	"strconv"
)

// The copy of a parent event differs from it in three members only:
// sessionId, eventId and synthetic. When the parent's body is canonical
// (exactly what schema.Encode writes for it, which the scan checked), the
// child's canonical body is the parent's with those three values replaced,
// so the copy splices bytes instead of decoding and encoding each event
// again. The members are found by position, in the order schema.Encode
// writes them, so each one found is a top-level member; a body that is not
// laid out that way is not spliced (the caller decodes it instead).

const (
	spliceHead = `{"schemaVersion":1,"sessionId":"`
	// The members between eventId and synthetic, in encoding order; the
	// id members are omitted when empty.
	spliceIgnorable = `,"ignorable":`
	spliceSynthetic = `,"synthetic":`
	spliceData      = `,"data":`
)

var spliceStrings = []struct {
	key      string
	optional bool
}{
	{`,"time":"`, false},
	{`,"type":"`, false},
	{`,"turnId":"`, true},
	{`,"stepId":"`, true},
	{`,"attemptId":"`, true},
	{`,"toolCallId":"`, true},
}

// spliced is a parent body taken apart for splicing.
type spliced struct {
	seq  uint64
	typ  []byte
	mid  []byte // from ,"time" up to (without) ,"synthetic"
	data []byte // the data value
}

// splitBody takes a canonical body of session sid apart; ok is false for a
// body that is not laid out as schema.Encode writes it.
func splitBody(b []byte, sid string) (sp spliced, ok bool) {
	i := len(spliceHead)
	if !bytes.HasPrefix(b, []byte(spliceHead)) || !hasAt(b, i, sid) || !hasAt(b, i+len(sid), `","seq":`) {
		return sp, false
	}
	i += len(sid) + len(`","seq":`)
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	seq, err := strconv.ParseUint(string(b[i:j]), 10, 64)
	if err != nil || b[i] == '0' {
		return sp, false
	}
	sp.seq = seq
	if !hasAt(b, j, `,"eventId":"`) {
		return sp, false
	}
	if j = plainString(b, j+len(`,"eventId":"`)); j < 0 {
		return sp, false
	}
	midStart := j
	for _, m := range spliceStrings {
		if !hasAt(b, j, m.key) {
			if m.optional {
				continue
			}
			return sp, false
		}
		start := j + len(m.key)
		if j = plainString(b, start); j < 0 {
			return sp, false
		}
		if m.key == `,"type":"` {
			sp.typ = b[start : j-1]
		}
	}
	if j = boolAt(b, j, spliceIgnorable); j < 0 {
		return sp, false
	}
	sp.mid = b[midStart:j]
	if j = boolAt(b, j, spliceSynthetic); j < 0 || !hasAt(b, j, spliceData) {
		return sp, false
	}
	j += len(spliceData)
	if len(b)-1 <= j || b[len(b)-1] != '}' {
		return sp, false
	}
	sp.data = b[j : len(b)-1]
	return sp, true
}

// appendChild appends the child's body of sp (session child, event id id,
// synthetic) to dst.
func appendChild(dst []byte, sp *spliced, child, id string) []byte {
	dst = append(dst, spliceHead...)
	dst = append(dst, child...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, sp.seq, 10)
	dst = append(dst, `,"eventId":"`...)
	dst = append(dst, id...)
	dst = append(dst, '"')
	dst = append(dst, sp.mid...)
	dst = append(dst, spliceSynthetic...)
	dst = append(dst, "true"...)
	dst = append(dst, spliceData...)
	dst = append(dst, sp.data...)
	return append(dst, '}')
}

func hasAt(b []byte, i int, s string) bool {
	return i <= len(b) && bytes.HasPrefix(b[i:], []byte(s))
}

// plainString returns the index after the closing quote of a string
// without escapes that starts at b[i] (after its opening quote), or -1.
func plainString(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			return -1
		}
	}
	return -1
}

// boolAt reads key then true or false at b[i] and returns the index after
// it, or -1.
func boolAt(b []byte, i int, key string) int {
	if !hasAt(b, i, key) {
		return -1
	}
	i += len(key)
	switch {
	case hasAt(b, i, "true"):
		return i + 4
	case hasAt(b, i, "false"):
		return i + 5
	}
	return -1
}
