package agentlog

import (
	"bytes"
	"errors"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ErrNotContinued: a line cannot be mapped as a continuation of the file's
// main session (it is not a line the format reads, or it would move the
// main path: a tree line whose parent is not the main path's last line, or
// whose id is taken). Map the whole file again.
var ErrNotContinued = errors.New("agentlog: the line does not continue the main session")

// Continuation is the state of a file's main session after ReadFile
// mapped it (Options.Continue): Add maps lines that follow the file, one
// at a time, into the events ReadFile gives the longer file, without
// reading the file again. It holds as long as each new line continues the
// main path, which is how an agent writes its transcript; a line that
// branches is ErrNotContinued. Not safe for concurrent use.
type Continuation struct {
	m       Mapper
	b       *Builder
	index   int             // the last line's number
	leaf    string          // the id of the main path's last line ("" = none)
	ids     map[string]bool // every tree id of the file
	compact bytes.Buffer
	broken  bool
}

func newContinuation(main *pass, nodes []node) *Continuation {
	c := &Continuation{m: main.m, b: main.b, index: main.index, ids: map[string]bool{}}
	for _, n := range nodes {
		if n.ok && n.id != "" {
			// A taken id makes the tree resolve to its first line, which a
			// continuation does not follow.
			c.broken = c.broken || c.ids[n.id]
			c.ids[n.id] = true
			c.leaf = n.id // the last tree line ends the main path
		}
	}
	return c
}

// Check says whether raw can continue the main session (nil), without
// mapping it.
func (c *Continuation) Check(raw []byte) error {
	if c.broken {
		return ErrNotContinued
	}
	l, err := decode(c.m, raw)
	if err != nil || l.ID != "" && (l.Parent != c.leaf || c.ids[l.ID]) {
		return ErrNotContinued
	}
	return nil
}

// Add maps the next line of the file; its events go to emit. Check the
// lines first: an error here leaves the Continuation unusable. After the
// last line of a batch, call End.
func (c *Continuation) Add(raw []byte, emit func(schema.Envelope) error) error {
	if err := c.Check(raw); err != nil {
		return err
	}
	l, _ := decode(c.m, raw)
	c.broken = true // until the line is all in
	c.b.emit = emit
	c.index++
	c.b.startLine(c.index, l.Key, l.Time)
	c.m.Map(c.b, l)
	line, err := compactLine(&c.compact, raw)
	if err != nil {
		return err
	}
	c.b.sourceLine(line)
	if err := c.b.Err(); err != nil {
		return err
	}
	if l.ID != "" {
		c.leaf, c.ids[l.ID] = l.ID, true
	}
	c.broken = false
	return nil
}

// End gives emit what a mapping that ends here gives at the end of the
// file (the held lines of a session whose first prompt has not come), as
// ReadFile does after a file's last line.
func (c *Continuation) End(emit func(schema.Envelope) error) error {
	c.b.emit = emit
	if err := c.b.finish(); err != nil {
		c.broken = true
		return err
	}
	return nil
}
