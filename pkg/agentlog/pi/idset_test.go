package pi

import (
	"math/rand/v2"
	"testing"
)

// An idSet answers as a map of the same ids, across the merges of its
// batches (ids drawn from a small range, so many are added again).
func TestIDSetIsASet(t *testing.T) {
	var s idSet
	m := map[uint32]struct{}{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5 * idSetBatch {
		v := r.Uint32N(8 * idSetBatch)
		if _, in := m[v]; s.has(v) != in {
			t.Fatalf("add %d: has(%d) = %v, want %v", i, v, !in, in)
		}
		s.add(v)
		m[v] = struct{}{}
	}
	for v := range uint32(8 * idSetBatch) {
		if _, in := m[v]; s.has(v) != in {
			t.Fatalf("has(%d) = %v, want %v", v, !in, in)
		}
	}
	if n := len(s.run) + len(s.added); n != len(m) {
		t.Fatalf("the set holds %d ids, want %d", n, len(m))
	}
}
