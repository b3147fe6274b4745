package session

import "sort"

// Context follows what the model sees of a session as its events go by
// in seq order (the /context view, exports to other formats): each
// model-visible event extends it, a compaction replaces what it covers by
// its summary, and a context/rewound takes it back to what it was right
// after the event at toSeq (the events after that stay in the log,
// abandoned). Which events are model-visible is the caller's to say.
type Context struct {
	nodes   []ctxNode
	changes []ctxChange // the context's last node after each change, by seq
	last    int         // the last node of the context; -1: empty
}

type ctxNode struct {
	seq  uint64
	prev int // -1: the first
}

type ctxChange struct {
	seq  uint64
	last int
}

// NewContext is an empty context.
func NewContext() *Context { return &Context{last: -1} }

func (c *Context) push(seq uint64) {
	c.nodes = append(c.nodes, ctxNode{seq: seq, prev: c.last})
	c.last = len(c.nodes) - 1
}

func (c *Context) changed(seq uint64) {
	c.changes = append(c.changes, ctxChange{seq: seq, last: c.last})
}

// Add extends the context with the model-visible event at seq.
func (c *Context) Add(seq uint64) {
	c.push(seq)
	c.changed(seq)
}

// Compact is a compaction/ended at seq: its summary, then what the
// context held after through.
func (c *Context) Compact(seq, through uint64) {
	kept := c.after(through)
	c.last = -1
	c.push(seq)
	for _, s := range kept {
		c.push(s)
	}
	c.changed(seq)
}

// Rewind is a context/rewound at seq: the context is again what it was
// right after the event at toSeq (empty when toSeq is before everything
// the Context was given).
func (c *Context) Rewind(seq, toSeq uint64) {
	i := sort.Search(len(c.changes), func(i int) bool { return c.changes[i].seq > toSeq })
	c.last = -1
	if i > 0 {
		c.last = c.changes[i-1].last
	}
	c.changed(seq)
}

// after is the context's seqs after through, in order.
func (c *Context) after(through uint64) []uint64 {
	var out []uint64
	for n := c.last; n >= 0 && c.nodes[n].seq > through; n = c.nodes[n].prev {
		out = append(out, c.nodes[n].seq)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Seqs are the seqs the model sees now, in order.
func (c *Context) Seqs() []uint64 { return c.after(0) }
