package projector

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTermHashesIsMap holds termHashes to the map of hashes it replaced:
// the same answers to has, the same len and the same hashes listed, over
// random hashes (the zero hash and hashes of equal low bits among them)
// added as noteTerm adds them, emptied at maxSessionTerms.
func TestTermHashesIsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pool []uint64
	for range 3000 {
		h := rng.Uint64()
		switch rng.IntN(8) {
		case 0:
			h &^= 0xffff // low bits of many others: long probes
		case 1:
			h &= 0xff // small: collide with each other
		}
		pool = append(pool, h)
	}
	pool = append(pool, 0, 1<<63)
	for trial := range 20 {
		var s termHashes
		m := map[uint64]struct{}{}
		for op := range 5000 {
			h := pool[rng.IntN(len(pool))]
			if _, ok := m[h]; s.has(h) != ok {
				t.Fatalf("trial %d op %d: has(%#x) = %v, the map %v", trial, op, h, !ok, ok)
			}
			if rng.IntN(3) > 0 {
				if len(m) >= maxSessionTerms {
					clear(m)
					s.reset()
				}
				m[h] = struct{}{}
				s.add(h)
			}
			if s.len() != len(m) {
				t.Fatalf("trial %d op %d: len %d, the map %d", trial, op, s.len(), len(m))
			}
		}
		if got, want := s.sorted(), slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
			t.Fatalf("trial %d: sorted %v, the map %v", trial, got, want)
		}
		if got, want := fmt.Sprint(s), fmt.Sprint(m); got != want {
			t.Fatalf("trial %d: printed %.80s, the map %.80s", trial, got, want)
		}
	}
}

// BenchmarkSessionTerms: the lookups of a catch-up in the sets of its
// sessions' indexed terms (1,000 sessions of maxSessionTerms terms each,
// more than the processor's caches hold), 50 terms of a message at a
// time, four in five found, in a termHashes and in the map of hashes it
// replaced.
func BenchmarkSessionTerms(b *testing.B) {
	const sessions = 1000
	rng := rand.New(rand.NewPCG(3, 4))
	held := make([][]uint64, sessions)
	for i := range held {
		for range maxSessionTerms {
			held[i] = append(held[i], termHash(fmt.Appendf(nil, "%d-%d", i, rng.Uint64())))
		}
	}
	// The terms of the messages looked up: a session each, at random.
	type message struct {
		session int
		terms   []uint64
	}
	msgs := make([]message, 4096)
	for i := range msgs {
		s := rng.IntN(sessions)
		msgs[i].session = s
		for range 50 {
			h := rng.Uint64()
			if rng.IntN(5) > 0 {
				h = held[s][rng.IntN(len(held[s]))]
			}
			msgs[i].terms = append(msgs[i].terms, h)
		}
	}
	b.Run("map", func(b *testing.B) {
		sets := make([]map[uint64]struct{}, sessions)
		for i := range sets {
			sets[i] = map[uint64]struct{}{}
			for _, h := range held[i] {
				sets[i][h] = struct{}{}
			}
		}
		found := 0
		for i := 0; b.Loop(); i++ {
			m := &msgs[i%len(msgs)]
			for _, h := range m.terms {
				if _, ok := sets[m.session][h]; ok {
					found++
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(50*b.N), "ns/lookup")
	})
	b.Run("table", func(b *testing.B) {
		sets := make([]termHashes, sessions)
		for i := range sets {
			for _, h := range held[i] {
				sets[i].add(h)
			}
		}
		found := 0
		for i := 0; b.Loop(); i++ {
			m := &msgs[i%len(msgs)]
			for _, h := range m.terms {
				if sets[m.session].has(h) {
					found++
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(50*b.N), "ns/lookup")
	})
}
