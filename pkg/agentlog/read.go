package agentlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
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

// Replayer is a Mapper that can take a line another mapper of the same
// file decoded (ReadFile's first pass) in place of decoding it again:
// Replay leaves the mapper as Decode of the line's text would and returns
// the Line Decode would give. Lines come to it in file order, as to Decode.
type Replayer interface {
	Replay(l Line) Line
}

// Line is a decoded source line.
type Line struct {
	Key    string    // the line's own id (uuid, entry id); "" = use its index
	ID     string    // tree node id; "" = not part of the tree
	Parent string    // tree parent id; "" or unknown = a root
	Time   time.Time // when the source wrote it, if it says
	Value  any       // the format's parsed line, for Map
}

// ForkAt is where a branch session forks from the main session.
type ForkAt struct {
	ParentID string
	Seq      uint64 // the fork copies parent events 1..Seq
}

// Plan announces a session to a Sink before its events.
type Plan struct {
	ID string
	// Fork: the session is a fork child; its first event is at Seq+2
	// (the forker writes session/created, the copies and fork/committed).
	Fork *ForkAt
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
	// Continue, when set, is given the main session's mapping state once
	// its events are out, to map lines that follow the file without
	// reading it again (not for a file whose last line is torn).
	Continue func(*Continuation)
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

// node is what the first pass keeps of a line.
type node struct {
	ok         bool // decoded
	id, parent string
}

// decoded is a line as the first pass read it, kept for the main pass.
type decoded struct {
	raw []byte
	l   Line
	err error
}

// maxKeptBytes bounds the text of the lines the first pass keeps for the
// main pass (a longer file is read again: its lines are not all held).
// Their decoded values take about as much again, and import maps up to
// eight files at once.
const maxKeptBytes = 8 << 20

// ReadFile maps the file at path to sessions and gives their events to sink.
func ReadFile(f Format, path string, opt Options, sink Sink) (Result, error) {
	var res Result
	// Pass 1: tree links, and the decoded lines for the main pass when
	// its mapper can take them (each line is then decoded once).
	var nodes []node
	var first []byte
	m := f.NewMapper("")
	_, keep := m.(Replayer)
	var kept []decoded
	keptBytes := 0
	err := scanLines(path, func(index int, raw []byte, last bool) error {
		l, err := decode(m, raw)
		if keep {
			if keptBytes += len(raw); keptBytes > maxKeptBytes {
				keep, kept = false, nil
			} else {
				kept = append(kept, decoded{raw: raw, l: l, err: err})
			}
		}
		if err != nil {
			if last {
				res.Torn = true
				return nil
			}
			nodes = append(nodes, node{})
			return nil
		}
		if first == nil {
			first = append([]byte(nil), raw...)
		}
		nodes = append(nodes, node{ok: true, id: l.ID, parent: l.Parent})
		return nil
	})
	if err != nil {
		return res, err
	}
	if first == nil {
		return res, nil // nothing complete yet
	}
	id, err := f.SessionID(path, first)
	if err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	t := buildTree(nodes)

	// Pass 2: the main session, every line.
	main, err := runPass(f, path, id, opt, sink, Plan{ID: id, FirstSeq: 1}, kept, func(i int) (bool, bool, error) {
		return nodes[i].id == "" || t.main[i], true, nil
	})
	if err != nil {
		return res, err
	}
	res.Sessions = append(res.Sessions, SessionResult{Plan: Plan{ID: id, FirstSeq: 1}, Events: main.stats.Events})
	res.Lines, res.Skipped, res.Damaged = main.stats.Lines, main.stats.Skipped, main.damaged
	if opt.Continue != nil && !res.Torn {
		opt.Continue(newContinuation(main, nodes))
	}
	for _, w := range main.warnings {
		if opt.Warn != nil {
			opt.Warn(path, w.line, w.msg)
		}
	}

	// Then one pass per branch.
	for n, br := range t.branches {
		child := ChildID(id, fmt.Sprintf("b%d", n+1))
		r, err := runBranch(f, path, id, child, opt, sink, nodes, t, br)
		if err != nil {
			return res, err
		}
		res.Sessions = append(res.Sessions, r)
	}
	return res, nil
}

// tree is the shape of a file: its main path and its branches.
type tree struct {
	main     []bool
	branches []branch
}

// branch is a leaf off the main path.
type branch struct {
	point int          // the main line it forks from; -1: none
	off   map[int]bool // its lines off the main path
	path  map[int]bool // all its lines, root to leaf
	first int          // its first line off the main path
	leaf  int
}

func buildTree(nodes []node) tree {
	t := tree{main: make([]bool, len(nodes))}
	byID := map[string]int{}
	last := -1
	for i, n := range nodes {
		if !n.ok || n.id == "" {
			continue
		}
		if _, dup := byID[n.id]; !dup {
			byID[n.id] = i
		}
		last = i
	}
	if last < 0 {
		return t
	}
	parent := func(i int) int {
		p, ok := byID[nodes[i].parent]
		if !ok || p >= i { // a parent must come first: no cycles
			return -1
		}
		return p
	}
	for i := last; i >= 0; i = parent(i) {
		t.main[i] = true
	}
	hasChild := make([]bool, len(nodes))
	for i, n := range nodes {
		if n.ok && n.id != "" {
			if p := parent(i); p >= 0 {
				hasChild[p] = true
			}
		}
	}
	for i, n := range nodes {
		if !n.ok || n.id == "" || t.main[i] || hasChild[i] || byID[n.id] != i {
			continue
		}
		br := branch{point: -1, off: map[int]bool{}, path: map[int]bool{}, leaf: i}
		for j := i; j >= 0; j = parent(j) {
			br.path[j] = true
			if t.main[j] {
				if br.point < 0 {
					br.point = j
				}
				continue
			}
			br.off[j] = true
			br.first = j
		}
		t.branches = append(t.branches, br)
	}
	sort.SliceStable(t.branches, func(a, b int) bool { return t.branches[a].first < t.branches[b].first })
	return t
}

// pass is one run of a builder over a file.
type pass struct {
	stats    Stats
	damaged  int
	warnings []warning
	// the end state, for a Continuation
	b     *Builder
	m     Mapper
	index int // the last line's number
}

type warning struct {
	line int
	msg  string
}

// picker says for line i (0-based) whether to map it (else its
// source/line only) and whether to keep it at all.
type picker func(i int) (mapIt, keep bool, err error)

// runPass maps the lines of path (kept: as the first pass decoded them,
// nil: read again) into one session.
func runPass(f Format, path, id string, opt Options, sink Sink, p Plan, kept []decoded, pick picker) (*pass, error) {
	out := &pass{}
	if err := sink.Session(p); err != nil {
		return nil, err
	}
	b := NewBuilder(f.Name(), id, opt.MaxEventBytes, sink.Event)
	if err := feed(f, path, id, b, out, kept, pick); err != nil {
		return nil, err
	}
	out.stats, out.b = b.Stats(), b
	return out, sink.Done()
}

// feed drives b with the lines of path that pick keeps: the lines kept
// by the first pass when there are any (the mapper is a Replayer), else
// those read from the file again.
func feed(f Format, path, id string, b *Builder, out *pass, kept []decoded, pick picker) error {
	m := f.NewMapper(id)
	out.m = m
	var compact bytes.Buffer
	i := -1
	line := func(index int, raw []byte, last bool, l Line, err error) error {
		i++
		out.index = index
		if err != nil {
			if !last {
				out.damaged++
				out.warnings = append(out.warnings, warning{index, err.Error()})
			}
			return nil
		}
		mapIt, keep, err := pick(i)
		if err != nil || !keep {
			return err
		}
		b.startLine(index, l.Key, l.Time)
		if mapIt {
			m.Map(b, l)
		} else {
			b.Skip("on another branch")
		}
		c, err := compactLine(&compact, raw)
		if err != nil {
			return err
		}
		b.sourceLine(c)
		return b.Err()
	}
	var err error
	if kept != nil {
		r := m.(Replayer)
		for k, d := range kept {
			l := d.l
			if d.err == nil {
				l = r.Replay(l)
			}
			if err = line(k+1, d.raw, k == len(kept)-1, l, d.err); err != nil {
				break
			}
		}
	} else {
		err = scanLines(path, func(index int, raw []byte, last bool) error {
			l, err := decode(m, raw)
			return line(index, raw, last, l, err)
		})
	}
	if err != nil {
		return err
	}
	return b.finish()
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
// for valid JSON, what json.Compact gives back unchanged.
func isCompact(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// runBranch maps one branch: a fork child of the main session when its
// branch point is a safe cut, else a session of its own. The fork child is
// the main session's builder (and mapper) replayed quietly through the
// branch point, then continued with the branch's own lines.
func runBranch(f Format, path, mainID, child string, opt Options, sink Sink, nodes []node, t tree, br branch) (SessionResult, error) {
	if br.point >= 0 {
		var plan *Plan
		unsafe := false
		b := NewBuilder(f.Name(), mainID, opt.MaxEventBytes, func(schema.Envelope) error { return nil })
		err := feed(f, path, mainID, b, &pass{}, nil, func(i int) (bool, bool, error) {
			switch {
			case i <= br.point:
				return nodes[i].id == "" || t.main[i], true, nil
			case unsafe || !br.off[i]:
				return false, false, nil
			case plan == nil:
				k := b.st.LastSeq
				if k == 0 || b.msg != nil || !session.Safe(b.st) {
					unsafe = true
					return false, false, nil
				}
				plan = &Plan{ID: child, Fork: &ForkAt{ParentID: mainID, Seq: k}, FirstSeq: k + 2}
				if err := sink.Session(*plan); err != nil {
					return false, false, err
				}
				b.id, b.st.SessionID = child, child
				b.st.LastSeq++ // the forker's fork/committed
				b.stats = Stats{}
				b.emit = sink.Event
			}
			return true, true, nil
		})
		if err != nil {
			return SessionResult{}, err
		}
		if plan != nil {
			return SessionResult{Plan: *plan, Events: b.stats.Events}, sink.Done()
		}
	}
	plan := Plan{ID: child, FirstSeq: 1}
	if err := sink.Session(plan); err != nil {
		return SessionResult{}, err
	}
	b := NewBuilder(f.Name(), child, opt.MaxEventBytes, sink.Event)
	b.Meta(Meta{Labels: map[string]string{LabelBranchOf: mainID}})
	err := feed(f, path, child, b, &pass{}, nil, func(i int) (bool, bool, error) { return br.path[i], br.path[i], nil })
	if err != nil {
		return SessionResult{}, err
	}
	return SessionResult{Plan: plan, Events: b.stats.Events}, sink.Done()
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
