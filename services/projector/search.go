package projector

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// The search index is a view: prefix keys in the projector's Pebble store
// (package store, SearchKey), written in the batch that folds the event,
// so it is as durable, as checksummed and as rebuildable as the other
// views. Each key names one term of one event: the metadata of
// session/created (id, title, agent, label keys and values, workspace) and
// the text of message/user and message/assistant. A search needs of a
// term in a session only the first event holding it (the hit's seq, and
// that the session holds it), so a key is written at a term's first
// occurrence in the session, not at every one: a session's own words
// repeat, and a key per occurrence made the index most of a catch-up's
// writes. The fold keeps the terms of a session it has indexed
// (entry.terms, in its snapshot too, so a restore continues it), never
// reading the store to know whether a term is there: every key it writes
// is new. The set is bounded: at maxSessionTerms it starts over, and a
// term seen again after that gets a second key, harmless to a search.
// What is indexed depends on the session's events alone, so a rebuild
// writes the same keys.
//
// Bounds, so an agent cannot make the index outgrow its log: the first
// maxIndexText bytes of text of an event are indexed, terms are 2 to
// maxTermBytes bytes, at most maxEventTerms distinct terms per event, and
// their keys at most four times the text (plus 2 KiB).
const (
	maxIndexText  = 32 << 10
	maxTermBytes  = 48
	maxEventTerms = 512
	// maxSessionTerms bounds the terms a session's fold state remembers
	// as indexed (entry.terms).
	maxSessionTerms = 1024
)

// terms appends the distinct search terms of s to dst: maximal runs of
// letters and digits, lower-cased.
func terms(dst []string, s string) []string {
	var ts termSet
	for _, t := range dst {
		ts.add([]byte(t), termHash([]byte(t)))
	}
	scanTerms(&ts, s, func(t []byte, _ uint64) { dst = append(dst, string(t)) })
	return dst
}

// termSet gathers the distinct terms of an event (at most
// maxEventTerms) in the order they first occur, without a string or an
// allocation per term: the fold indexes every message with it.
type termSet struct {
	buf  []byte // the terms, one after the other
	ends []int  // where each ends in buf
	cur  []byte // the term being read
	// slots finds a term by its termHash: open addressing, each slot 0
	// (empty) or a term's index + 1; filled lists the slots in use. A
	// term is compared with those of its slot and the next ones only,
	// not with every term of the event (a message of 4 KiB of prose took
	// 370 µs comparing each word with every one before it,
	// BenchmarkIndexMessage).
	slots  [2 * maxEventTerms]uint16
	filled []uint16
}

func (ts *termSet) reset() {
	for _, i := range ts.filled {
		ts.slots[i] = 0
	}
	ts.buf, ts.ends, ts.cur, ts.filled = ts.buf[:0], ts.ends[:0], ts.cur[:0], ts.filled[:0]
}

// add adds t, whose termHash is h, unless the set holds it or is full,
// and reports whether it did.
func (ts *termSet) add(t []byte, h uint64) bool {
	if len(ts.ends) >= maxEventTerms {
		return false
	}
	mask := uint64(len(ts.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		k := int(ts.slots[i])
		if k == 0 {
			ts.buf = append(ts.buf, t...)
			ts.ends = append(ts.ends, len(ts.buf))
			ts.slots[i] = uint16(len(ts.ends))
			ts.filled = append(ts.filled, uint16(i))
			return true
		}
		start := 0
		if k > 1 {
			start = ts.ends[k-2]
		}
		if bytes.Equal(ts.buf[start:ts.ends[k-1]], t) {
			return false
		}
	}
}

// scanTerms adds the terms of s (its first maxIndexText bytes) to ts,
// calling yield with each one added and its termHash (t is valid during
// the call). s is a string or the bytes of one (a message's text as its
// data holds it, not copied).
func scanTerms[T string | []byte](ts *termSet, s T, yield func(t []byte, h uint64)) {
	if len(s) > maxIndexText {
		s = s[:maxIndexText]
	}
	flush := func() {
		if n := len(ts.cur); n >= 2 && n <= maxTermBytes {
			if h := termHash(ts.cur); ts.add(ts.cur, h) {
				yield(ts.buf[len(ts.buf)-n:], h)
			}
		}
		ts.cur = ts.cur[:0]
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// ASCII: what unicode.IsLetter, IsDigit and ToLower say of it.
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			default:
				flush()
				continue
			}
			if len(ts.cur) <= maxTermBytes {
				ts.cur = append(ts.cur, c)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		i += size
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if len(ts.cur) <= maxTermBytes {
			ts.cur = utf8.AppendRune(ts.cur, unicode.ToLower(r))
		}
	}
	flush()
}

// messageText is the text of a message's content: every JSON string
// value in it (not the keys: those are the agent's field names), whatever
// shape the agent gave it, up to maxIndexText bytes.
func messageText(content json.RawMessage) string {
	if len(content) > 1 && content[0] == '"' && plainASCII(content[1:len(content)-1]) {
		// Decoded and valid already (DecodeData): without an escape or
		// a byte beyond ASCII, the string is what its quotes hold.
		return string(content[1 : len(content)-1])
	}
	if len(content) > 0 && content[0] == '"' {
		// The common case, a plain string: no tree to walk.
		var str string
		if json.Unmarshal(content, &str) != nil {
			return ""
		}
		return str
	}
	var v any
	if json.Unmarshal(content, &v) != nil {
		return ""
	}
	var sb strings.Builder
	var walk func(v any)
	walk = func(v any) {
		if sb.Len() >= maxIndexText {
			return
		}
		switch x := v.(type) {
		case string:
			sb.WriteString(x)
			sb.WriteByte(' ')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k])
			}
		}
	}
	walk(v)
	return sb.String()
}

// plainASCII reports whether b is ASCII without a backslash.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// searchText is the indexed text of event ev ("" for none).
func searchText(id string, ev *schema.Envelope) string {
	switch ev.Type {
	case schema.TypeSessionCreated:
		var d schema.SessionCreated
		if ev.DecodeData(&d) != nil {
			return id
		}
		return createdText(id, &d)
	case schema.TypeMessageUser, schema.TypeMessageAssistant:
		// The text is the content member's, whatever else the data
		// holds (an assistant message imported from Claude Code carries
		// its model and usage too): the member named exactly content, the
		// last one if the data names it twice, as messageContent reads it.
		var d map[string]json.RawMessage
		if json.Unmarshal(ev.Data, &d) != nil || len(d["content"]) == 0 {
			return ""
		}
		return messageText(d["content"])
	}
	return ""
}

// createdText is the text of session id's session/created event of data
// d: the id, the title, the agent, the workspace, the labels.
func createdText(id string, d *schema.SessionCreated) string {
	parts := []string{id, d.Title, d.Agent, d.Workspace}
	for _, k := range sortedKeys(d.Labels) {
		parts = append(parts, k, d.Labels[k])
	}
	return strings.Join(parts, " ")
}

// dashboard keeps what the dashboard needs of a folded event: its search
// terms, and a count of repairs for the fleet overview.
func (f *folder) dashboard(en *entry, ev *schema.Envelope) {
	if ev.Type == schema.TypeRepairApplied {
		f.met.repairs.Inc()
	}
	f.indexSearch(en, ev, true)
}

// noteTerm notes the term of hash h as indexed in the session.
func (en *entry) noteTerm(h uint64) {
	if en.terms.len() >= maxSessionTerms {
		en.terms.reset()
	}
	en.terms.add(h)
}

// termHash is what a session's set of indexed terms keeps of a term. Two
// terms of one session with the same hash (about one chance in 2^44 for
// a full set) would index the second one at the first one's event: a
// search for it would miss the session, and a rebuild would miss it
// alike.
func termHash(t []byte) uint64 { return xxhash.Sum64(t) }

// appendTermHashes appends the hashes of terms to dst for a snapshot:
// base64 of their big-endian bytes, in ascending order.
func appendTermHashes(dst []byte, terms *termHashes) []byte {
	hs := terms.sorted()
	raw := make([]byte, 0, 8*len(hs))
	for _, h := range hs {
		raw = binary.BigEndian.AppendUint64(raw, h)
	}
	return base64.StdEncoding.AppendEncode(dst, raw)
}

// indexSearch writes the search keys of event ev of en into the open
// batch (write false: only notes its terms as indexed, for a restore that
// folds events again). Every key is new (one per term's first event), so
// none has an old value to take out of the checksum.
func (f *folder) indexSearch(en *entry, ev *schema.Envelope, write bool) {
	if ev.Type == schema.TypeMessageUser || ev.Type == schema.TypeMessageAssistant {
		if content, sure := messageContent(ev.Data); sure {
			if len(content) > 1 && content[0] == '"' && plainASCII(content[1:len(content)-1]) {
				// The usual message: its text is what the quotes hold,
				// read where the event's data holds it.
				indexTerms(f, en, ev, content[1:len(content)-1], write)
				return
			}
			// A string with escapes (a new line will do) unquoted as
			// json.Unmarshal does, or the strings of content blocks: read
			// from the data into a buffer the folder keeps, without
			// checking again the JSON the fold's decode checked.
			var txt []byte
			ok := false
			switch {
			case len(content) == 0:
				return
			case content[0] == '"':
				txt, ok = appendUnquoted(f.text[:0], content)
			case content[0] == '[' || content[0] == '{':
				txt, ok = appendText(f.text[:0], content)
			}
			if !ok {
				indexTerms(f, en, ev, messageText(content), write)
				return
			}
			if cap(txt) <= maxTextScratch {
				f.text = txt
			}
			indexTerms(f, en, ev, txt, write)
			return
		}
	}
	if ev.Type == schema.TypeSessionCreated && en.st != nil && en.st.LastSeq == ev.Seq {
		// Folded just now: the state's meta is the data, decoded once
		// (searchText decodes it again).
		indexTerms(f, en, ev, createdText(en.id, &en.st.Meta), write)
		return
	}
	indexTerms(f, en, ev, searchText(en.id, ev), write)
}

// messageContent is the content of a message's data as searchText finds
// it (the member named exactly content, the last one of that name), read
// from the data without decoding it again: the fold's decode checked it
// is valid JSON. Other members (an assistant message's model and usage)
// are passed over. sure false: the data is not laid out as the common
// case (a compact object, keys without escapes), and only searchText can
// say; sure with no content: searchText finds no text (no data, or no
// content).
func messageContent(data []byte) (content []byte, sure bool) {
	if len(data) == 0 || string(data) == "null" {
		return nil, true
	}
	if len(data) < 2 || data[0] != '{' {
		return nil, false
	}
	if string(data) == "{}" {
		return nil, true
	}
	for i := 1; ; {
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		k := i + 1
		for k < len(data) && data[k] != '"' && data[k] != '\\' {
			k++
		}
		if k+1 >= len(data) || data[k] != '"' || data[k+1] != ':' {
			return nil, false
		}
		v := k + 2
		end, ok := compactValueEnd(data, v)
		if !ok {
			return nil, false
		}
		if string(data[i+1:k]) == "content" {
			content = data[v:end]
		}
		switch {
		case data[end] == ',':
			i = end + 1
		case data[end] == '}' && end == len(data)-1:
			return content, true
		default:
			return nil, false
		}
	}
}

// maxTextScratch bounds the buffer the folder keeps for the text of a
// message (folder.text); a longer text leaves it to the collector.
const maxTextScratch = 64 << 10

// appendUnquoted appends the text of the JSON string s (quotes included)
// to dst, as json.Unmarshal decodes it (invalid UTF-8 and lone surrogates
// become U+FFFD); ok false for anything but a valid JSON string.
func appendUnquoted(dst, s []byte) (_ []byte, ok bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return dst, false
	}
	s = s[1 : len(s)-1]
	for r := 0; r < len(s); {
		// A run of bytes that stand for themselves is copied at once:
		// a byte at a time, this loop was 9% of the fold of chat
		// messages of 1 KiB.
		if j := asIsEnd(s, r); j > r {
			dst = append(dst, s[r:j]...)
			if r = j; r == len(s) {
				break
			}
		}
		switch c := s[r]; {
		case c == '\\':
			if r+1 >= len(s) {
				return dst, false
			}
			switch e := s[r+1]; e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r:])
				if rr < 0 {
					return dst, false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, hex4(s[r:])); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default:
				return dst, false
			}
			r += 2
		case c == '"', c < ' ':
			return dst, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst, true
}

// asIsEnd returns the index of the first byte at or after s[i] that is
// not ASCII standing for itself in a JSON string (len(s): none).
func asIsEnd(s []byte, i int) int {
	for i < len(s) && asIs[s[i]] {
		i++
	}
	return i
}

// asIs holds the bytes a JSON string holds as they are: ASCII but for
// the control characters, the quote and the backslash.
var asIs = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// hex4 is the code unit of the escape \uXXXX that s starts with (-1: s
// does not start with one).
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	if r, ok := schema.Hex4(s[2:6]); ok {
		return r
	}
	return -1
}

// compactValueEnd is the index after the JSON value at b[i] of valid
// JSON b, when a ',' or a '}' follows it there (ok false: anything else,
// such as white space).
func compactValueEnd(b []byte, i int) (end int, ok bool) {
	end = schema.SkipValue(b, i)
	return end, end < len(b) && (b[end] == ',' || b[end] == '}')
}

// appendText appends the text messageText finds in the array or object
// v (valid JSON) to dst: every string value, each followed by a space,
// the members of an object in the order of their keys (the last of a
// key repeated), up to maxIndexText bytes. It walks the data the fold
// decoded, where messageText decodes it again into a tree of maps. ok
// false: v is not compact JSON (white space), which messageText reads.
func appendText(dst, v []byte) (_ []byte, ok bool) {
	if len(v) == 0 {
		return dst, false
	}
	if len(dst) >= maxIndexText {
		return dst, true
	}
	switch v[0] {
	case '"':
		if dst, ok = appendUnquoted(dst, v); !ok {
			return dst, false
		}
		return append(dst, ' '), true
	case '[':
		for i := 1; i < len(v) && v[i] != ']'; {
			end := schema.SkipValue(v, i)
			if end >= len(v) {
				return dst, false
			}
			if dst, ok = appendText(dst, v[i:end]); !ok {
				return dst, false
			}
			switch {
			case v[end] == ',':
				i = end + 1
			case v[end] == ']' && end == len(v)-1:
				return dst, true
			default:
				return dst, false
			}
		}
		return dst, string(v) == "[]"
	case '{':
		type member struct{ key, val []byte }
		var ms []member
		for i := 1; i < len(v) && v[i] != '}'; {
			k := schema.SkipValue(v, i)
			if v[i] != '"' || k+1 >= len(v) || v[k] != ':' {
				return dst, false
			}
			key := v[i+1 : k-1]
			if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
				if key, ok = appendUnquoted(nil, v[i:k]); !ok {
					return dst, false
				}
			}
			end := schema.SkipValue(v, k+1)
			if end >= len(v) {
				return dst, false
			}
			ms = append(ms, member{key, v[k+1 : end]})
			switch {
			case v[end] == ',':
				i = end + 1
			case v[end] == '}' && end == len(v)-1:
				i = end
			default:
				return dst, false
			}
		}
		if len(ms) == 0 && string(v) != "{}" {
			return dst, false
		}
		slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
		for i, m := range ms {
			if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
				continue // a map keeps the last value of a key
			}
			if dst, ok = appendText(dst, m.val); !ok {
				return dst, false
			}
		}
	}
	return dst, true
}

// indexTerms indexes the terms of txt, the text of event ev of en (see
// indexSearch).
func indexTerms[T string | []byte](f *folder, en *entry, ev *schema.Envelope, txt T, write bool) {
	if len(txt) == 0 {
		return
	}
	ts := &f.terms
	ts.reset()
	// Short words under a long session id cost more key bytes than text:
	// an event's keys stay within a few times its text.
	budget := 4*len(txt) + 2048
	set := func(t []byte, h uint64) {
		if budget < 0 {
			return
		}
		if en.terms.has(h) {
			return
		}
		f.scratch = store.AppendSearchKey(f.scratch[:0], t, en.id, ev.Seq)
		if budget -= len(f.scratch); budget < 0 {
			return
		}
		if write {
			f.batch.Set(f.scratch, nil, []byte{})
		}
		en.noteTerm(h)
	}
	if ev.Type == schema.TypeSessionCreated {
		// The whole id too, so a pasted id finds its session.
		id := []byte(strings.ToLower(en.id))
		if h := termHash(id); ts.add(id, h) {
			set(id, h)
		}
	}
	scanTerms(ts, txt, set)
}
