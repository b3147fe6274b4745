package agentlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Format is one agent CLI's session file format (see the package doc).
type Format interface {
	// Name is the --from/--to name and the agent of session/created.
	Name() string
	// IsSessionFile reports whether a file met in a walked directory is a
	// session file of this format.
	IsSessionFile(path string) bool
	// SessionID is the sessionlog id of the file's session, from its path
	// and its first complete line.
	SessionID(path string, first []byte) (string, error)
	// NewMapper returns the mapping state of one pass over one file.
	NewMapper(sessionID string) Mapper
	// Export writes a session in this format.
	Export(w io.Writer, x *Export) error
}

// Mapper decodes and maps the lines of one file, in order.
type Mapper interface {
	// Decode parses one complete line (valid UTF-8, not always valid
	// JSON: it must refuse a line that is not JSON, and leave the mapper
	// as it was then). An error marks it damaged.
	Decode(raw []byte) (Line, error)
	// Map drives b with the steps of the line (nothing for a line of a kind
	// that maps to no event: call b.Skip with the reason).
	Map(b *Builder, l Line)
}

// Line is a decoded source line.
type Line struct {
	Key   string    // the line's own id (uuid, entry id); "" = use its index
	Time  time.Time // when the source wrote it, if it says
	Value any       // the format's parsed line, for Map
}

// Plan announces a session to a Sink before its events.
type Plan struct {
	ID string
	// FirstSeq is the seq of the first event the Sink gets.
	FirstSeq uint64
}

// Sink receives the sessions of a file one after another.
type Sink interface {
	Session(p Plan) error
	Event(e schema.Envelope) error
	// Done ends the session announced last.
	Done() error
}

// Options tune ReadFile.
type Options struct {
	MaxEventBytes int // 0: schema.DefaultMaxEventBytes
	// Warn is told of each damaged line (1-based line number).
	Warn func(path string, line int, msg string)
	// Continue, when set, is given the session's mapping state once its
	// events are out, to map lines that follow the file without reading
	// it again (not for a file whose last line is torn).
	Continue func(*Continuation)
	// ModTime is the time of the lines that say none before any line
	// that does (zero: the file's modification time).
	ModTime time.Time
}

// SessionResult is one session a file gave.
type SessionResult struct {
	Plan
	Events int // events given to the sink
}

// Result is what ReadFile did with a file.
type Result struct {
	Sessions []SessionResult
	Lines    int  // complete lines
	Skipped  int  // lines mapped to nothing but their source/line
	Damaged  int  // unparseable lines skipped
	Torn     bool // an unparseable last line was left for later
}

// ReadFile maps the file at path, every line in file order, to one
// session and gives its events to sink.
func ReadFile(f Format, path string, opt Options, sink Sink) (Result, error) {
	var res Result
	if opt.ModTime.IsZero() {
		if info, err := os.Stat(path); err == nil {
			opt.ModTime = info.ModTime().UTC()
		}
	}
	var p *pass
	var plan Plan
	var compact bytes.Buffer
	damaged := 0
	var warnings []warning
	err := scanLines(path, func(index int, raw []byte, last bool) error {
		var l Line
		var err error
		if p == nil {
			// The first complete line names the session.
			if _, err = decode(f.NewMapper(""), raw); err == nil {
				id, err := f.SessionID(path, raw)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				plan = Plan{ID: id, FirstSeq: 1}
				if err := sink.Session(plan); err != nil {
					return err
				}
				p = &pass{m: f.NewMapper(id), b: NewBuilder(f.Name(), id, opt.MaxEventBytes, sink.Event)}
				p.b.defaultAt = opt.ModTime
			}
		}
		if p != nil {
			l, err = decode(p.m, raw)
			p.index = index
		}
		if err != nil {
			if last {
				res.Torn = true
			} else {
				damaged++
				warnings = append(warnings, warning{index, err.Error()})
			}
			return nil
		}
		p.b.startLine(index, l.Key, l.Time, raw)
		p.m.Map(p.b, l)
		c, err := p.b.compactLine(&compact, raw)
		if err != nil {
			return err
		}
		p.b.sourceLine(c)
		return p.b.Err()
	})
	if err == nil && p != nil {
		err = p.b.finish()
	}
	for _, w := range warnings {
		if opt.Warn != nil {
			opt.Warn(path, w.line, w.msg)
		}
	}
	if err != nil || p == nil {
		return res, err // nothing complete yet, or an error
	}
	if err := sink.Done(); err != nil {
		return res, err
	}
	st := p.b.Stats()
	res.Sessions = append(res.Sessions, SessionResult{Plan: plan, Events: st.Events})
	res.Lines, res.Skipped, res.Damaged = st.Lines, st.Skipped, damaged
	if opt.Continue != nil && !res.Torn {
		opt.Continue(&Continuation{m: p.m, b: p.b, index: p.index})
	}
	return res, nil
}

// pass is the mapping of one file: its builder and mapper, and the last
// line's number.
type pass struct {
	b     *Builder
	m     Mapper
	index int
}

type warning struct {
	line int
	msg  string
}

// compactLine is raw, a JSON text, compacted (in buf when it is not
// compact already: agents write compact lines, and json.Compact would
// copy each one through its slower scanner for nothing;
// BenchmarkCompactLine).
func compactLine(buf *bytes.Buffer, raw []byte) ([]byte, error) {
	if isCompact(raw) {
		return raw, nil
	}
	buf.Reset()
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// isCompact reports whether raw has no whitespace outside its strings:
// for valid JSON, what json.Compact gives back unchanged. A string is
// passed over at once: it ends at the first quote after it that follows
// an even run of backslashes (bytes.IndexByte finds each quote), which
// is where reading it a byte at a time, a backslash taking the byte
// after it, ends it too (TestIsCompact holds the two equal).
func isCompact(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			end := stringEnd(raw, i)
			if end < 0 {
				return true // unterminated: the rest is inside the string
			}
			i = end
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}

// stringEnd is the index of the quote that closes the string opened at
// raw[open], -1 when none does.
func stringEnd(raw []byte, open int) int {
	for from := open + 1; ; {
		k := bytes.IndexByte(raw[from:], '"')
		if k < 0 {
			return -1
		}
		q := from + k
		slashes := 0
		for p := q - 1; p > open && raw[p] == '\\'; p-- {
			slashes++
		}
		if slashes%2 == 0 {
			return q
		}
		from = q + 1
	}
}

// MaxLineBytes bounds a source line: a longer one is damaged (no agent
// writes one; a file that has one is not read into memory whole for it).
const MaxLineBytes = 64 << 20

// decode parses a line: valid UTF-8 JSON the format understands.
func decode(m Mapper, raw []byte) (Line, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return Line{}, errors.New("empty line")
	}
	if len(raw) > MaxLineBytes {
		return Line{}, fmt.Errorf("line of %d bytes, over %d", len(raw), MaxLineBytes)
	}
	if !utf8.Valid(raw) {
		return Line{}, errors.New("not valid UTF-8")
	}
	// A line is checked as JSON only when the mapper refuses it: a
	// mapper's Decode parses it anyway, and a line that is not JSON
	// fails there before it changes the mapper.
	l, err := m.Decode(raw)
	if err != nil && !json.Valid(raw) {
		return Line{}, errors.New("not valid JSON")
	}
	return l, err
}

// scanLines calls fn with each line of path (without its newline), its
// 1-based number, and whether it is the last line and has no newline or
// ends the file. Lines of any length are read whole.
func scanLines(path string, fn func(index int, raw []byte, last bool) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// A buffer of the file's size, up to 1 MiB (ReadBytes joins longer
	// lines): most files are far smaller than the bound.
	size := 1 << 20
	if info, err := f.Stat(); err == nil && info.Size() < int64(size) {
		size = max(int(info.Size())+1, 4096)
	}
	r := bufio.NewReaderSize(f, size)
	var cur []byte
	index := 0
	for {
		line, err := r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) > 0 {
			if cur != nil {
				index++
				if ferr := fn(index, cur, false); ferr != nil {
					return ferr
				}
			}
			cur = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		}
		if err != nil { // EOF
			if cur != nil {
				index++
				return fn(index, cur, true)
			}
			return nil
		}
	}
}
