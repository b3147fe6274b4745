package agentlog

// OpenCalls are the tool calls an exporter wrote that have no result
// written yet, in the order of their requests, each with its number among
// all the requests written (a stable id for the result an export makes
// up for it). A call leaves when its result is written, so they hold the
// calls open at once, not every call of the session.
type OpenCalls struct {
	n     int            // requests written
	open  map[string]int // call id -> its number
	order []OpenCall     // in order; those since answered are left out when listed
}

// OpenCall is a call without a result and its number among the requests.
type OpenCall struct {
	ID string
	N  int
}

// Request notes a call written: a request of a call already open changes
// nothing but the count.
func (c *OpenCalls) Request(id string) {
	n := c.n
	c.n++
	if c.open == nil {
		c.open = map[string]int{}
	}
	if _, ok := c.open[id]; ok {
		return
	}
	c.open[id] = n
	c.order = append(c.order, OpenCall{ID: id, N: n})
}

// Answer notes the result of a call written.
func (c *OpenCalls) Answer(id string) {
	if _, ok := c.open[id]; !ok {
		return
	}
	delete(c.open, id)
	if len(c.order) > 64 && len(c.order) > 2*len(c.open) {
		c.order = c.list(c.order[:0])
	}
}

// IsOpen reports whether the call was requested and has no result.
func (c *OpenCalls) IsOpen(id string) bool {
	_, ok := c.open[id]
	return ok
}

// List is the open calls in the order of their requests.
func (c *OpenCalls) List() []OpenCall { return c.list(nil) }

func (c *OpenCalls) list(out []OpenCall) []OpenCall {
	for _, o := range c.order {
		if n, ok := c.open[o.ID]; ok && n == o.N {
			out = append(out, o)
		}
	}
	return out
}
