package schema

import (
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Almost every stored body is exactly what Encode wrote, laid out member
// by member in the envelope's field order. decodeCanonical reads such a
// body by position, without reflection, and answers ok only when it is
// sure: the body is canonical (Encode of the result gives it back byte for
// byte) and its data passes CheckJSON. Anything it is not sure of (an
// escape in an envelope string, a non-ASCII id, a data key with an escape,
// an object with many keys) it leaves to the general path, which accepts
// and refuses the same bodies; tests and a fuzz target hold the two equal.
//
// The scan of the layout (ScanCanonical) is the one canonical-envelope
// scanner: decodeCanonical checks its time and data and builds the
// envelope, a copier rewrites its identity members (CanonicalBody.Rewrite).

const (
	canonHead = `{"schemaVersion":1,"sessionId":"`
	// maxFastKeys bounds the keys of one data object the fast path checks
	// for duplicates; a larger object takes the general path.
	maxFastKeys = 32
)

var canonIDs = [...]struct {
	key string
	off int // which Envelope string: 0 turnId, 1 stepId, 2 attemptId, 3 toolCallId
}{
	{`,"turnId":"`, 0}, {`,"stepId":"`, 1}, {`,"attemptId":"`, 2}, {`,"toolCallId":"`, 3},
}

// span is where a member's value is in a body: b[start:end] (a string's
// contents, without its quotes).
type span struct{ start, end int }

// CanonicalBody is a body laid out as Encode writes it, taken apart by
// position: each member in the envelope's field order, each envelope
// string plain (printable ASCII that Encode writes as it is), the seq
// without a leading zero. ScanCanonical checks only that layout, not the
// time or the data: a body DecodeCanonical calls canonical always scans,
// and so does one that only looks like it.
//
// A copier (the forker) rewrites a canonical body's identity members with
// Rewrite instead of decoding and encoding the event again.
type CanonicalBody struct {
	Seq       uint64
	Ignorable bool
	Synthetic bool

	b                         []byte
	sessionID, eventID, time  span
	typ                       span
	ids                       [4]span // turnId, stepId, attemptId, toolCallId; zero when absent
	identityEnd, afterIgnored int     // after the eventId's closing quote; after ignorable's value
	data                      int     // where the data value starts (it ends before the last byte)
}

// Identity is what tells an event from its copy in another session: the
// members Rewrite replaces.
type Identity struct {
	SessionID string
	Seq       uint64
	EventID   string
	Synthetic bool
}

// ScanCanonical takes b apart if it is laid out as Encode writes it; ok is
// false for any other body (decode it instead).
func ScanCanonical(b []byte) (c CanonicalBody, ok bool) {
	c, i, ok := scanCanonicalHead(b)
	if !ok || len(b)-1 <= i || b[len(b)-1] != '}' {
		return c, false
	}
	c.data = i
	c.b = b
	return c, true
}

// scanCanonicalHead scans the members before the data, returning where
// the data value starts.
func scanCanonicalHead(b []byte) (c CanonicalBody, i int, ok bool) {
	if !hasPrefixAt(b, 0, canonHead) {
		return c, 0, false
	}
	i = len(canonHead)
	if c.sessionID, i = canonSpan(b, i); i < 0 || c.sessionID.end == c.sessionID.start {
		return c, 0, false
	}
	if i = expect(b, i, `,"seq":`); i < 0 {
		return c, 0, false
	}
	if c.Seq, i = canonUint(b, i); i < 0 {
		return c, 0, false
	}
	if c.eventID, i = canonSpan(b, expect(b, i, `,"eventId":"`)); i < 0 {
		return c, 0, false
	}
	c.identityEnd = i
	if c.time, i = canonSpan(b, expect(b, i, `,"time":"`)); i < 0 {
		return c, 0, false
	}
	if c.typ, i = canonSpan(b, expect(b, i, `,"type":"`)); i < 0 {
		return c, 0, false
	}
	for _, m := range canonIDs {
		if !hasPrefixAt(b, i, m.key) {
			continue
		}
		// Encode omits an empty id: a present one is never empty.
		var sp span
		if sp, i = canonSpan(b, i+len(m.key)); i < 0 || sp.end == sp.start {
			return c, 0, false
		}
		c.ids[m.off] = sp
	}
	if c.Ignorable, i = canonBool(b, i, `,"ignorable":`); i < 0 {
		return c, 0, false
	}
	c.afterIgnored = i
	if c.Synthetic, i = canonBool(b, i, `,"synthetic":`); i < 0 {
		return c, 0, false
	}
	if i = expect(b, i, `,"data":`); i < 0 {
		return c, 0, false
	}
	return c, i, true
}

// canonSpan is canonString's span.
func canonSpan(b []byte, i int) (span, int) {
	_, j := canonString(b, i)
	if j < 0 {
		return span{}, -1
	}
	return span{i, j - 1}, j
}

func (c *CanonicalBody) str(s span) string { return string(c.b[s.start:s.end]) }

// id is the string at s: a view of c's bytes when view is set, else a
// copy.
func (c *CanonicalBody) id(s span, view bool) string {
	if !view || s.end == s.start {
		return c.str(s)
	}
	return unsafe.String(&c.b[s.start], s.end-s.start)
}

// SessionIs reports whether the body's sessionId is id.
func (c *CanonicalBody) SessionIs(id string) bool {
	return string(c.b[c.sessionID.start:c.sessionID.end]) == id
}

// Type is the body's event type.
func (c *CanonicalBody) Type() string { return c.str(c.typ) }

// Rewrite appends to dst the body with its identity members replaced by
// id's, every other byte as it is: for a canonical body, the canonical
// body of the event with that identity (what Encode writes for it). ok is
// false when id's strings are not plain (encode the event instead).
func (c *CanonicalBody) Rewrite(dst []byte, id Identity) ([]byte, bool) {
	if id.SessionID == "" || !plainString(id.SessionID) || !plainString(id.EventID) {
		return dst, false
	}
	dst = append(dst, canonHead...)
	dst = append(dst, id.SessionID...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, id.Seq, 10)
	dst = append(dst, `,"eventId":"`...)
	dst = append(dst, id.EventID...)
	dst = append(dst, '"')
	dst = append(dst, c.b[c.identityEnd:c.afterIgnored]...)
	dst = append(dst, `,"synthetic":`...)
	dst = strconv.AppendBool(dst, id.Synthetic)
	dst = append(dst, `,"data":`...)
	return append(dst, c.b[c.data:]...), true
}

// plainString: every byte of s is written by Encode as it is (and is not
// the quote).
func plainString(s string) bool { return plainSpanString(s) == len(s) }

func decodeCanonical(b []byte) (e Envelope, ok bool) { return decodeCanonicalData(b, true, "") }

// decodeCanonicalData decodes a body laid out as Encode writes it; its
// Data is a copy when copyData is set, else b's bytes.
func decodeCanonicalData(b []byte, copyData bool, sessionID string) (e Envelope, ok bool) {
	return decodeCanonicalAs(b, copyData, false, sessionID)
}

// decodeCanonicalAs is decodeCanonicalData whose event id and ids are
// views of b when views is set (DecodeCanonicalViewOf).
func decodeCanonicalAs(b []byte, copyData, views bool, sessionID string) (e Envelope, ok bool) {
	c, ok := ScanCanonical(b)
	if !ok {
		return e, false
	}
	data := b[c.data : len(b)-1]
	if end, ok := canonValue(data, 0, 0, MaxJSONDepth-1); !ok || end != len(data) {
		return e, false
	}
	if !c.envelope(&e, sessionID, views) {
		return e, false
	}
	if copyData {
		e.Data = append([]byte(nil), data...)
	} else {
		e.Data = data[:len(data):len(data)]
	}
	return e, true
}

// CanonicalEventAt reads an event laid out as Encode writes it at b[i:],
// inside a larger document (an append request's events): its data is
// checked as JSONScanner.Value(dataDepth) with MaxDepth maxDepth checks
// it, and more (what canonValue refuses). ok means b[i:end] is exactly
// Encode's body for e (whose Data is a sub-slice of b); not ok means only
// "not sure": decode the event by the general path, which accepts and
// refuses the same events.
func CanonicalEventAt(b []byte, i, dataDepth, maxDepth int) (e Envelope, end int, ok bool) {
	sub := b[i:]
	c, j, ok := scanCanonicalHead(sub)
	if !ok {
		return e, 0, false
	}
	k, ok := canonValue(sub, j, dataDepth, maxDepth)
	if !ok || k >= len(sub) || sub[k] != '}' {
		return e, 0, false
	}
	c.b = sub[:k+1]
	if !c.envelope(&e, "", false) {
		return Envelope{}, 0, false
	}
	e.Data = sub[j:k:k]
	return e, i + k + 1, true
}

// envelope fills e with c's members but the data; false when the time
// is not what Encode writes for it. A sessionId that is sessionID is that
// string, not a copy. views: the event id and the ids are views of c's
// bytes, not copies.
func (c *CanonicalBody) envelope(e *Envelope, sessionID string, views bool) bool {
	b := c.b
	if t, ok := canonUTC(b[c.time.start:c.time.end]); ok {
		e.Time = t
	} else if err := e.Time.UnmarshalJSON(b[c.time.start-1 : c.time.end+1]); err != nil || !canonTime(e.Time, b[c.time.start:c.time.end]) {
		// (The time with its quotes.)
		return false
	}
	e.SchemaVersion = Version
	if sessionID != "" && c.SessionIs(sessionID) {
		e.SessionID = sessionID
	} else {
		e.SessionID = c.str(c.sessionID)
	}
	e.Seq = c.Seq
	e.EventID = c.id(c.eventID, views)
	// A registered type is its spec's string: no copy per event decoded.
	if spec := specOfBytes(b[c.typ.start:c.typ.end]); spec != nil {
		e.Type = spec.Type
	} else {
		e.Type = c.str(c.typ)
	}
	ids := [4]*string{&e.TurnID, &e.StepID, &e.AttemptID, &e.ToolCallID}
	for k, sp := range c.ids {
		if sp.end > sp.start {
			*ids[k] = c.id(sp, views)
		}
	}
	e.Ignorable, e.Synthetic = c.Ignorable, c.Synthetic
	return true
}

func hasPrefixAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// expect returns the index after s at b[i], or -1.
func expect(b []byte, i int, s string) int {
	if i < 0 || !hasPrefixAt(b, i, s) {
		return -1
	}
	return i + len(s)
}

// member reads key (up to the string's opening quote) and the string.
func member(b []byte, i int, key string) ([]byte, int) {
	return canonString(b, expect(b, i, key))
}

// canonString reads the rest of a string whose opening quote is before
// b[i], made only of bytes Encode writes as they are and that need no
// thought: printable ASCII but for the quote, the backslash and the three
// that Encode escapes for HTML. It returns the contents and the index
// after the closing quote, or -1.
func canonString(b []byte, i int) ([]byte, int) {
	if i < 0 {
		return nil, -1
	}
	j := i
	for j < len(b) && stringBytes[b[j]] {
		j++
	}
	if j < len(b) && b[j] == '"' {
		return b[i:j], j + 1
	}
	return nil, -1
}

// plainBytes: the bytes Encode writes in a string as they are and that
// need no thought (the quote aside): printable ASCII but for the
// backslash and the three escaped for HTML. One lookup per byte of the
// envelope's strings, which the scan of every stored body reads.
var plainBytes = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// stringBytes is plainByte but for the quote: the bytes a scan of a
// string's contents steps over with one lookup each, stopping at the
// closing quote or at anything else to look at.
var stringBytes = func() (t [256]bool) {
	t = plainBytes
	t['"'] = false
	return t
}()

// canonUint reads a decimal uint64 as Encode writes it (no sign, no
// leading zero), returning the index after it or -1.
func canonUint(b []byte, i int) (uint64, int) {
	if i < 0 {
		return 0, -1
	}
	j := i
	var v uint64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + uint64(b[j]-'0')
		j++
	}
	if j == i || b[i] == '0' && j > i+1 {
		return 0, -1
	}
	if j-i > 19 {
		// 19 digits never overflow; more are ParseUint's to refuse.
		var err error
		if v, err = strconv.ParseUint(string(b[i:j]), 10, 64); err != nil {
			return 0, -1
		}
	}
	return v, j
}

func canonBool(b []byte, i int, key string) (bool, int) {
	if i = expect(b, i, key); i < 0 {
		return false, -1
	}
	switch {
	case hasPrefixAt(b, i, "true"):
		return true, i + 4
	case hasPrefixAt(b, i, "false"):
		return false, i + 5
	}
	return false, -1
}

// canonUTC reads the time Encode writes for a UTC time (every event
// time the services stamp): "2006-01-02T15:04:05Z", with a fraction of 1
// to 9 digits, the last not 0, before the Z. ok means s is exactly that
// layout with every field in range, and t is what time.Time's
// UnmarshalJSON reads from it (and MarshalJSON writes back as s); any
// other s (another zone, a trailing 0, an out-of-range field) is not ok,
// and left to the general path, which decides. It saves that path's two
// passes (a parse, then a format to compare) on every event decoded.
func canonUTC(s []byte) (t time.Time, ok bool) {
	if len(s) < 20 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return t, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range s[i : i+n] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return t, false
	}
	if day > 28 && day > daysIn(time.Month(month), year) {
		return t, false
	}
	ns := 0
	switch frac := s[19 : len(s)-1]; {
	case len(frac) == 0:
	case frac[0] != '.' || len(frac) < 2 || len(frac) > 10 || frac[len(frac)-1] == '0':
		return t, false
	default:
		v := num(20, len(frac)-1)
		if v < 0 {
			return t, false
		}
		for range 10 - len(frac) {
			v *= 10
		}
		ns = v
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC), true
}

// daysIn is the number of days of month m of year (day 0 of the next
// month is its last).
func daysIn(m time.Month, year int) int { return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }

// canonTime: s is what time.Time's MarshalJSON writes for t.
func canonTime(t time.Time, s []byte) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	var buf [64]byte
	return string(t.AppendFormat(buf[:0], time.RFC3339Nano)) == string(s)
}

// canonValue checks the JSON value at b[i] and returns the index after it.
// ok means: well formed, compact (no whitespace), nothing Encode would
// rewrite (it escapes <, >, &, U+2028 and U+2029), valid UTF-8, no lone
// surrogate escapes, no duplicated keys, at most maxDepth containers deep
// (depth are open around it). Not ok means only "not sure".
func canonValue(b []byte, i, depth, maxDepth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	c := b[i]
	if c == '{' || c == '[' {
		if depth >= maxDepth {
			return i, false
		}
		if i+1 < len(b) && b[i+1] == c+2 { // {} or []
			return i + 2, true
		}
		i++
	}
	switch {
	case c == '{':
		var keys [maxFastKeys][]byte
		n := 0
		for {
			if i >= len(b) || b[i] != '"' || n == maxFastKeys {
				return i, false
			}
			k, j, escaped := scanString(b, i+1)
			if j < 0 || escaped {
				return i, false
			}
			for _, o := range keys[:n] {
				if string(o) == string(k) {
					return i, false
				}
			}
			keys[n] = k
			n++
			if j >= len(b) || b[j] != ':' {
				return i, false
			}
			more, ok := false, false
			if i, more, ok = element(b, j+1, depth+1, maxDepth, '}'); !more {
				return i, ok
			}
		}
	case c == '[':
		for more, ok := true, false; ; {
			if i, more, ok = element(b, i, depth+1, maxDepth, ']'); !more {
				return i, ok
			}
		}
	case c == '"':
		_, j, _ := scanString(b, i+1)
		return j, j >= 0
	case c == 't':
		return i + 4, hasPrefixAt(b, i, "true")
	case c == 'f':
		return i + 5, hasPrefixAt(b, i, "false")
	case c == 'n':
		return i + 4, hasPrefixAt(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		j := scanNumber(b, i)
		return j, j > i
	}
	return i, false
}

// element checks a member's value or an element at b[i] and what follows
// it: more after a comma, ok after the container's closing delimiter. It
// returns the index after either.
func element(b []byte, i, depth, maxDepth int, closing byte) (next int, more, ok bool) {
	if i, ok = canonValue(b, i, depth, maxDepth); !ok {
		return i, false, false
	}
	switch {
	case i < len(b) && b[i] == ',':
		return i + 1, true, true
	case i < len(b) && b[i] == closing:
		return i + 1, false, true
	}
	return i, false, false
}

// scanString reads the rest of a JSON string (its opening quote is before
// b[i]) and returns its raw contents, the index after the closing quote
// (-1 if not sure of it) and whether it holds escapes.
func scanString(b []byte, i int) ([]byte, int, bool) {
	escaped := false
	for j := i; j < len(b); {
		if stringBytes[b[j]] {
			j = plainSpan(b, j+1)
			continue
		}
		c := b[j]
		switch {
		case c == '"':
			return b[i:j], j + 1, escaped
		case c == '\\':
			escaped = true
			if j+1 >= len(b) {
				return nil, -1, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) {
					return nil, -1, false
				}
				v, err := strconv.ParseUint(string(b[j+2:j+6]), 16, 16)
				if err != nil || v >= 0xd800 && v < 0xe000 {
					// Surrogates (pairs or lone) are the general path's.
					return nil, -1, false
				}
				j += 6
			default:
				return nil, -1, false
			}
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return nil, -1, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return nil, -1, false
			}
			j += size
		}
	}
	return nil, -1, false
}

// scanNumber returns the index after the JSON number at b[i], or i if there
// is none.
func scanNumber(b []byte, i int) int {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	digits := func() bool {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j > k
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case !digits():
		return i
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !digits() {
			return i
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !digits() {
			return i
		}
	}
	return j
}

// encodedSize is about what Encode writes for e.
func encodedSize(e *Envelope) int {
	return 200 + len(e.SessionID) + len(e.EventID) + len(e.Type) + len(e.TurnID) + len(e.StepID) +
		len(e.AttemptID) + len(e.ToolCallID) + len(e.Data)
}

// appendCanonical appends what json.Marshal writes for e, when it is sure
// of it: every string plain (as canonString reads them), a time
// json.Marshal can write, data that is already what json.Marshal would
// make of it. Not ok leaves it to json.Marshal.
func appendCanonical(b []byte, e *Envelope) ([]byte, bool) {
	plain := plainString
	if e.SchemaVersion != Version || !plain(e.SessionID) || !plain(e.EventID) || !plain(e.Type) ||
		!plain(e.TurnID) || !plain(e.StepID) || !plain(e.AttemptID) || !plain(e.ToolCallID) {
		return b, false
	}
	if end, ok := canonValue(e.Data, 0, 0, MaxJSONDepth); !ok || end != len(e.Data) {
		return b, false
	}
	b = append(b, canonHead...)
	b = append(b, e.SessionID...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"eventId":"`...)
	b = append(b, e.EventID...)
	b = append(b, `","time":"`...)
	if tb, ok := appendTimeUTC(b, e.Time); ok {
		b = tb
	} else if b, ok = appendTimeOther(b, e.Time); !ok {
		return b, false
	}
	b = append(b, `","type":"`...)
	b = append(b, e.Type...)
	b = append(b, '"')
	for _, m := range [...]struct{ key, v string }{
		{`,"turnId":"`, e.TurnID}, {`,"stepId":"`, e.StepID}, {`,"attemptId":"`, e.AttemptID}, {`,"toolCallId":"`, e.ToolCallID},
	} {
		if m.v != "" {
			b = append(b, m.key...)
			b = append(b, m.v...)
			b = append(b, '"')
		}
	}
	b = append(b, `,"ignorable":`...)
	b = strconv.AppendBool(b, e.Ignorable)
	b = append(b, `,"synthetic":`...)
	b = strconv.AppendBool(b, e.Synthetic)
	b = append(b, `,"data":`...)
	b = append(b, e.Data...)
	return append(b, '}'), true
}

// appendTimeOther appends e.Time as json.Marshal writes it, for a time
// appendTimeUTC does not write; not ok for the times json.Marshal refuses
// (time.Time.MarshalJSON): a year not four digits wide, a zone hour past
// 23.
func appendTimeOther(b []byte, t time.Time) ([]byte, bool) {
	t0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	if len(b) < t0+5 || b[t0+4] != '-' {
		return b, false
	}
	if b[len(b)-1] != 'Z' {
		z := b[len(b)-6:]
		if z[0] != '+' && z[0] != '-' || 10*(z[1]-'0')+(z[2]-'0') >= 24 {
			return b, false
		}
	}
	return b, true
}
