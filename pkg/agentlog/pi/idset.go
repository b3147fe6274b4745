package pi

import (
	"slices"
)

// idSet is a set of entry ids as 32-bit numbers, 4 bytes each: a sorted
// run, and the ids added since, which join the run by a merge when they
// are idSetBatch (a map's slot per id, with its growth, cost about four
// times as much).
type idSet struct {
	run   []uint32
	added map[uint32]struct{}
}

const idSetBatch = 4096

func (s *idSet) has(v uint32) bool {
	if _, ok := s.added[v]; ok {
		return true
	}
	_, ok := slices.BinarySearch(s.run, v)
	return ok
}

func (s *idSet) add(v uint32) {
	if s.has(v) {
		return
	}
	if s.added == nil {
		s.added = make(map[uint32]struct{}, idSetBatch)
	}
	s.added[v] = struct{}{}
	if len(s.added) >= idSetBatch {
		s.merge()
	}
}

// merge moves the added ids into the run, merging from its end in place.
func (s *idSet) merge() {
	batch := make([]uint32, 0, len(s.added))
	for v := range s.added {
		batch = append(batch, v)
	}
	slices.Sort(batch)
	clear(s.added)
	i, j := len(s.run)-1, len(batch)-1
	s.run = slices.Grow(s.run, len(batch))[:len(s.run)+len(batch)]
	for k := len(s.run) - 1; j >= 0; k-- {
		if i >= 0 && s.run[i] > batch[j] {
			s.run[k] = s.run[i]
			i--
		} else {
			s.run[k] = batch[j]
			j--
		}
	}
}
