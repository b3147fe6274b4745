package schema

import "testing"

// TestSpecTable holds specOf to the registry map: every registered type
// has a slot of its own, and strings that are not a type (prefixes,
// extensions, other cases, one byte changed) find no spec.
func TestSpecTable(t *testing.T) {
	if !specTableOK {
		t.Fatal("no table without two types in one slot was found: lookups use the map")
	}
	probes := []string{"", "x", "session", "session/", "tool/resul", "tool/results", "TOOL/RESULT", "turn/started/"}
	for typ, s := range registry {
		if got := specOf(typ); got != s {
			t.Fatalf("specOf(%q) = %v, want the registry's", typ, got)
		}
		if got := specOfBytes([]byte(typ)); got != s {
			t.Fatalf("specOfBytes(%q) = %v, want the registry's", typ, got)
		}
		for i := range len(typ) {
			b := []byte(typ)
			b[i] ^= 0x20
			probes = append(probes, string(b), typ[:i], typ+typ[i:])
		}
	}
	for _, p := range probes {
		if got, want := specOf(p), registry[p]; got != want {
			t.Fatalf("specOf(%q) = %v, want %v", p, got, want)
		}
	}
}

// BenchmarkSpecLookup: what the table buys over the registry map, per
// lookup of a registered type (the strings are copies, as a decoded
// event's type is, so neither side compares by pointer).
func BenchmarkSpecLookup(b *testing.B) {
	var types []string
	for typ := range registry {
		types = append(types, string([]byte(typ)))
	}
	b.Run("table", func(b *testing.B) {
		for i := range b.N {
			if specOf(types[i%len(types)]) == nil {
				b.Fatal("not found")
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for i := range b.N {
			if registry[types[i%len(types)]] == nil {
				b.Fatal("not found")
			}
		}
	})
}
