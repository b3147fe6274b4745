package schema

import "unsafe"

// Every event a reader folds has its type looked up in the registry: by
// the decoder (the spec's string instead of a copy), by the judge (Known)
// and by the fold's rules (Lookup). A Go map hashes the whole string and
// probes; the registered types are few and fixed at init, so specTable
// holds them in a table indexed by their length and two of their bytes,
// positions (among the first and last 8) and multiplier chosen at init so that no two types share a
// slot: a lookup is a few instructions and one comparison of strings
// (the spec's own string, usually, which compares by its pointer).

const specSlots = 128

var (
	specTable [specSlots]*Spec
	// specHash's parameters; specTableOK is false when none was found
	// (the lookups then use the registry map).
	// (Every type is at least specMinLen bytes, and 8 or more.)
	specFirst, specLast, specMul, specMinLen uint32
	specTableOK                              bool
)

func specSlot(s string, first, last, mul uint32) uint32 {
	n := uint32(len(s))
	h := n*mul + uint32(s[first])*0x9E37 + uint32(s[n-1-last])
	return (h * 0x9E3779B1) >> (32 - 7)
}

// buildSpecTable fills specTable from the registry (after every register).
func buildSpecTable() {
	specMinLen = ^uint32(0)
	for typ := range registry {
		specMinLen = min(specMinLen, uint32(len(typ)))
	}
	if specMinLen < 8 {
		return
	}
	for mul := uint32(1); mul < 64; mul += 2 {
		for first := range uint32(8) {
			for last := range uint32(8) {
				var t [specSlots]*Spec
				ok := true
				for typ, s := range registry {
					k := specSlot(typ, first, last, mul)
					if t[k] != nil {
						ok = false
						break
					}
					t[k] = s
				}
				if ok {
					specTable, specFirst, specLast, specMul, specTableOK = t, first, last, mul, true
					return
				}
			}
		}
	}
}

// specOf is the spec of a registered type, or nil. typ is not kept: it
// may be a view of a buffer.
func specOf(typ string) *Spec {
	if !specTableOK {
		return registry[typ]
	}
	if uint32(len(typ)) < specMinLen {
		return nil
	}
	if s := specTable[specSlot(typ, specFirst, specLast, specMul)]; s != nil && s.Type == typ {
		return s
	}
	return nil
}

// specOfBytes is specOf of the string b holds, without a copy.
func specOfBytes(b []byte) *Spec {
	if len(b) == 0 {
		return nil
	}
	return specOf(unsafe.String(&b[0], len(b)))
}
