package agentlog

import (
	"bytes"
	"errors"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ErrNotContinued: a line cannot be mapped as a continuation of the file's
// session (it is not a line the format reads). Map the whole file again.
var ErrNotContinued = errors.New("agentlog: the line does not continue the session")

// Continuation is the state of a file's session after ReadFile mapped it
// (Options.Continue): Add maps lines that follow the file, one at a time,
// into the events ReadFile gives the longer file, without reading the
// file again. A file is one session in file order, so every line the
// format reads continues it. Not safe for concurrent use.
type Continuation struct {
	m       Mapper
	b       *Builder
	index   int // the last line's number
	compact bytes.Buffer
	broken  bool
}

// Check says whether raw can continue the session (nil), without mapping
// it.
func (c *Continuation) Check(raw []byte) error {
	if c.broken {
		return ErrNotContinued
	}
	if _, err := decode(c.m, raw); err != nil {
		return ErrNotContinued
	}
	return nil
}

// Add maps the next line of the file; its events go to emit. Check the
// lines first: an error here leaves the Continuation unusable. After the
// last line of a batch, call End.
func (c *Continuation) Add(raw []byte, emit func(schema.Envelope) error) error {
	if c.broken {
		return ErrNotContinued
	}
	l, err := decode(c.m, raw)
	if err != nil {
		return ErrNotContinued
	}
	c.broken = true // until the line is all in
	c.b.emit = emit
	c.index++
	c.b.startLine(c.index, l.Key, l.Time, raw)
	c.m.Map(c.b, l)
	line, err := c.b.compactLine(&c.compact, raw)
	if err != nil {
		return err
	}
	c.b.sourceLine(line)
	if err := c.b.Err(); err != nil {
		return err
	}
	c.broken = false
	return nil
}

// End gives emit what a mapping that ends here gives at the end of the
// file, as ReadFile does after a file's last line.
func (c *Continuation) End(emit func(schema.Envelope) error) error {
	c.b.emit = emit
	if err := c.b.finish(); err != nil {
		c.broken = true
		return err
	}
	return nil
}
