package projector

import (
	"slices"
	"strconv"
	"strings"
)

// termHashes is the set of the termHash of each term indexed in a session
// (entry.terms): a table of the hashes themselves, found by open
// addressing from their low bits (a hash is already uniform, so none is
// hashed again). A catch-up looks up every distinct term of every message
// in its session's set, and the sets of a fleet's sessions (up to
// maxSessionTerms each) are larger than the processor's caches: a Go map
// read a control word and then a slot of another cache line for each,
// where a lookup here reads one slot, mostly in one line
// (BenchmarkSessionTerms).
type termHashes struct {
	// slots holds the hashes, 0 where empty; its length is a power of
	// two, at most three quarters full.
	slots []uint64
	n     int  // hashes in slots
	zero  bool // the set holds the hash 0 (which slots cannot)
}

// len is the number of hashes in the set.
func (s *termHashes) len() int {
	if s.zero {
		return s.n + 1
	}
	return s.n
}

// has reports whether the set holds h.
func (s *termHashes) has(h uint64) bool {
	if h == 0 {
		return s.zero
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// add puts h in the set.
func (s *termHashes) add(h uint64) {
	if h == 0 {
		s.zero = true
		return
	}
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return
		case 0:
			s.slots[i] = h
			s.n++
			return
		}
	}
}

// grow doubles the table (16 slots at first).
func (s *termHashes) grow() {
	old := s.slots
	s.slots, s.n = make([]uint64, max(16, 2*len(old))), 0
	for _, h := range old {
		if h != 0 {
			s.add(h)
		}
	}
}

// reset empties the set, keeping its table.
func (s *termHashes) reset() {
	clear(s.slots)
	s.n, s.zero = 0, false
}

// sorted returns the hashes in ascending order.
func (s *termHashes) sorted() []uint64 {
	hs := make([]uint64, 0, s.len())
	if s.zero {
		hs = append(hs, 0)
	}
	for _, h := range s.slots {
		if h != 0 {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	return hs
}

// String lists the hashes in ascending order (whatever order they were
// added in), as fmt prints a map of them.
func (s termHashes) String() string {
	var b strings.Builder
	b.WriteString("map[")
	for i, h := range s.sorted() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatUint(h, 10))
		b.WriteString(":{}")
	}
	b.WriteByte(']')
	return b.String()
}
