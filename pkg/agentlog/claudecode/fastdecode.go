package claudecode

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The fast decode reads the lines agents write (the keys spelled as the
// fields are, each once, values of the fields' types) in one pass of its
// own, where encoding/json checks the line with its scanner and then
// decodes it with the scanner again (the line's message content twice
// more: as the message's raw content, then as blocks). What it decodes
// is what encoding/json gives; it gives up (ok false) on anything it does
// not read as encoding/json would for sure, and the caller decodes with
// encoding/json then: a key that only matches a field's name in another
// case (or could: an escape or a non-ASCII byte in a key), a field given
// twice, a value not of the field's type (null aside, which leaves the
// field as it is), invalid UTF-8, a document nested deeper than
// encoding/json reads. FuzzFastLine and FuzzFastBlocks hold it to
// encoding/json; BenchmarkDecodeLine compares the two.

// maxDepth bounds the nesting the fast decode reads, well under
// encoding/json's bound (10000) wherever the count starts.
const maxDepth = 9000

// scan reads JSON in b from i.
type scan struct {
	b []byte
	i int
}

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads the string at i (b[i] is '"'): its end (after the closing
// quote) and whether it has an escape; ok false for an invalid one.
func (s *scan) str() (end int, esc, ok bool) {
	b := s.b
	for i := s.i + 1; i < len(b); {
		// The bytes up to the next quote, backslash or control byte,
		// eight at a time.
		j := schema.PlainRun(b, i)
		if j == len(b) {
			return 0, false, false
		}
		switch c := b[j]; {
		case c == '"':
			s.i = j + 1
			return j + 1, esc, true
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return 0, false, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i = j + 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return 0, false, false
				}
				i = j + 6
			default:
				return 0, false, false
			}
		default: // a control byte
			return 0, false, false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// value reads any value at i (after whitespace), nested in depth arrays
// or objects: ok false when it is not JSON.
func (s *scan) value(depth int) bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return false
		}
		if c == '[' {
			return s.list('[', ']', func() bool { return s.value(depth + 1) })
		}
		return s.list('{', '}', func() bool {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return false
			}
			_, _, ok := s.str()
			return ok && s.colon() && s.value(depth+1)
		})
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	}
	return false
}

// colon reads the colon after a key.
func (s *scan) colon() bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ':' {
		s.i++
		return true
	}
	return false
}

// next reads what follows a member: a comma, or closing (done).
func (s *scan) next(closing byte) (done, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return false, true
	case closing:
		s.i++
		return true, true
	}
	return false, false
}

func (s *scan) lit(l string) bool {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

func (s *scan) digits() int {
	j := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - j
}

// number reads a number by JSON's grammar.
func (s *scan) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

// object reads the object at i (after whitespace) member by member:
// field is given each key, its value still to read (the key is a plain
// one: no escape, ASCII only; any other gives up). ok false: not an
// object, not JSON, or field gave up.
func (s *scan) object(field func(key []byte) bool) bool {
	return s.list('{', '}', func() bool {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		start := s.i
		end, esc, ok := s.str()
		if !ok || esc || !s.colon() {
			return false
		}
		key := s.b[start+1 : end-1]
		for _, c := range key {
			if c >= utf8.RuneSelf {
				return false
			}
		}
		return field(key)
	})
}

// list reads the array or object at i (after whitespace), opened by
// open and closed by closing, giving each member to member (which reads
// it); ok false when it is not one, or member gave up.
func (s *scan) list(open, closing byte, member func() bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != open {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		return true
	}
	for {
		if !member() {
			return false
		}
		if done, ok := s.next(closing); done || !ok {
			return ok
		}
	}
}

// skip reads a value of a key no field has: ok false when the key is
// one encoding/json would match to one of names in another case.
func (s *scan) skip(key []byte, names []string) bool {
	for _, n := range names {
		if len(n) == len(key) && bytes.EqualFold(key, []byte(n)) {
			return false
		}
	}
	return s.value(1)
}

// null reads a null if one is at i (after whitespace).
func (s *scan) null() bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		return s.lit("null")
	}
	return false
}

// string reads a string value into v (null leaves v as it is).
func (s *scan) string(v *string) bool {
	if s.null() {
		return true
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	start := s.i
	end, esc, ok := s.str()
	if !ok {
		return false
	}
	if !esc {
		*v = string(s.b[start+1 : end-1])
		return true
	}
	return unquote(s.b[start:end], v)
}

// unquote decodes a string token with escapes into v: the short escapes
// by hand, a \u escape by encoding/json (it replaces a lone surrogate).
func unquote(tok []byte, v *string) bool {
	body := tok[1 : len(tok)-1]
	if bytes.Contains(body, []byte(`\u`)) {
		return json.Unmarshal(tok, v) == nil
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		default: // " \ /
			c = body[i]
		}
		out = append(out, c)
	}
	*v = string(out)
	return true
}

// stringPtr reads a string or null (nil) into v.
func (s *scan) stringPtr(v **string) bool {
	if s.null() {
		*v = nil
		return true
	}
	var str string
	if !s.string(&str) {
		return false
	}
	*v = &str
	return true
}

// bool reads true or false into v (null leaves v as it is).
func (s *scan) bool(v *bool) bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case 't':
		*v = true
		return s.lit("true")
	case 'f':
		*v = false
		return s.lit("false")
	}
	return s.null()
}

// raw reads any value into v, its bytes as they are (capped: an append
// to v copies it).
func (s *scan) raw(v *json.RawMessage) bool {
	s.ws()
	start := s.i
	if !s.value(1) {
		return false
	}
	*v = s.b[start:s.i:s.i]
	return true
}

// once notes field f of a value read: false when it was read before.
func once(seen *uint32, f uint32) bool {
	if *seen&f != 0 {
		return false
	}
	*seen |= f
	return true
}

var lineNames = []string{"type", "subtype", "uuid", "parentUuid", "logicalParentUuid", "isSidechain", "isMeta",
	"isCompactSummary", "sessionId", "agentId", "cwd", "gitBranch", "version", "timestamp", "summary", "message"}

// fastLine decodes raw into l as decodeLine does, with its message when
// it has one; ok false: decodeLine must (a message must be an object).
func fastLine(raw []byte, l *line) bool {
	if !utf8.Valid(raw) {
		return false
	}
	s := &scan{b: bytes.Clone(raw)}
	var seen uint32
	var msg *message
	var v line
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return once(&seen, 1<<0) && s.string(&v.Type)
		case "subtype":
			return once(&seen, 1<<1) && s.string(&v.Subtype)
		case "uuid":
			return once(&seen, 1<<2) && s.string(&v.UUID)
		case "parentUuid":
			return once(&seen, 1<<3) && s.stringPtr(&v.ParentUUID)
		case "logicalParentUuid":
			return once(&seen, 1<<4) && s.string(&v.LogicalParent)
		case "isSidechain":
			return once(&seen, 1<<5) && s.bool(&v.IsSidechain)
		case "isMeta":
			return once(&seen, 1<<6) && s.bool(&v.IsMeta)
		case "isCompactSummary":
			return once(&seen, 1<<7) && s.bool(&v.IsCompactSummary)
		case "sessionId":
			return once(&seen, 1<<8) && s.string(&v.SessionID)
		case "agentId":
			return once(&seen, 1<<9) && s.string(&v.AgentID)
		case "cwd":
			return once(&seen, 1<<10) && s.string(&v.Cwd)
		case "gitBranch":
			return once(&seen, 1<<11) && s.string(&v.GitBranch)
		case "version":
			return once(&seen, 1<<12) && s.string(&v.Version)
		case "timestamp":
			return once(&seen, 1<<13) && s.string(&v.Timestamp)
		case "summary":
			return once(&seen, 1<<14) && s.string(&v.Summary)
		case "message":
			if !once(&seen, 1<<15) {
				return false
			}
			msg = &message{}
			return s.message(msg)
		}
		return s.skip(key, lineNames)
	})
	if s.ws(); !ok || s.i != len(s.b) {
		return false
	}
	*l = v
	l.msg = msg
	return true
}

var messageNames = []string{"id", "role", "model", "content", "stop_reason", "usage"}

// message reads a message object into m.
func (s *scan) message(m *message) bool {
	var seen uint32
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return once(&seen, 1<<0) && s.string(&m.ID)
		case "role":
			return once(&seen, 1<<1) && s.string(&m.Role)
		case "model":
			return once(&seen, 1<<2) && s.string(&m.Model)
		case "content":
			return once(&seen, 1<<3) && s.raw(&m.Content)
		case "stop_reason":
			return once(&seen, 1<<4) && s.stringPtr(&m.StopReason)
		case "usage":
			return once(&seen, 1<<5) && s.raw(&m.Usage)
		}
		return s.skip(key, messageNames)
	})
}

var blockNames = []string{"type", "text", "id", "name", "input", "tool_use_id", "content", "is_error"}

// fastBlocks decodes content, an array of objects, as json.Unmarshal
// decodes it into a []block, and gives each element's bytes too (as
// json.Unmarshal gives them in a []json.RawMessage); ok false: anything
// else (the caller decodes with encoding/json).
func fastBlocks(content []byte) (blocks []block, raws []json.RawMessage, ok bool) {
	if !utf8.Valid(content) {
		return nil, nil, false
	}
	s := &scan{b: content}
	blocks, raws = []block{}, []json.RawMessage{}
	if !s.list('[', ']', func() bool {
		s.ws()
		start := s.i
		var bl block
		if !s.block(&bl) {
			return false
		}
		blocks, raws = append(blocks, bl), append(raws, s.b[start:s.i:s.i])
		return true
	}) {
		return nil, nil, false
	}
	if s.ws(); s.i != len(s.b) {
		return nil, nil, false
	}
	return blocks, raws, true
}

// block reads a content block object into bl.
func (s *scan) block(bl *block) bool {
	var seen uint32
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return once(&seen, 1<<0) && s.string(&bl.Type)
		case "text":
			return once(&seen, 1<<1) && s.string(&bl.Text)
		case "id":
			return once(&seen, 1<<2) && s.string(&bl.ID)
		case "name":
			return once(&seen, 1<<3) && s.string(&bl.Name)
		case "input":
			return once(&seen, 1<<4) && s.raw(&bl.Input)
		case "tool_use_id":
			return once(&seen, 1<<5) && s.string(&bl.ToolUseID)
		case "content":
			return once(&seen, 1<<6) && s.raw(&bl.Content)
		case "is_error":
			return once(&seen, 1<<7) && s.bool(&bl.IsError)
		}
		return s.skip(key, blockNames)
	})
}
