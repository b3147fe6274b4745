package schema

import (
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
)

// Most data types are flat: strings, booleans and raw JSON values. For those,
// decodeFlat fills the struct from a compact document by hand, without
// encoding/json's reflection walk; it answers ok only when the result is
// the one exactUnmarshal would give (a compact canonical object, every key
// an exact field name, every string field a plain string, every bool
// field true or false), and
// leaves everything else, errors included, to exactUnmarshal.

type flatField struct {
	name  string
	index int
	kind  flatKind
}

type flatKind uint8

const (
	flatString flatKind = iota
	flatRaw             // json.RawMessage
	flatBool
)

// flatPlans caches, per struct type, its fields when it is flat (nil when
// it is not).
var flatPlans sync.Map // reflect.Type -> []flatField

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func flatPlan(t reflect.Type) []flatField {
	if p, ok := flatPlans.Load(t); ok {
		return p.([]flatField)
	}
	var plan []flatField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" || strings.Contains(opts, "string") {
			plan = nil
			break
		}
		switch {
		case f.Type == rawMessageType:
			plan = append(plan, flatField{name: name, index: i, kind: flatRaw})
		case (f.Type.Kind() == reflect.String || f.Type.Kind() == reflect.Bool) && !reflect.PointerTo(f.Type).Implements(unmarshalerType) &&
			!reflect.PointerTo(f.Type).Implements(textUnmarshalerType):
			k := flatString
			if f.Type.Kind() == reflect.Bool {
				k = flatBool
			}
			plan = append(plan, flatField{name: name, index: i, kind: k})
		default:
			plan = nil
		}
		if plan == nil {
			break
		}
	}
	if plan == nil {
		plan = []flatField{}
	}
	flatPlans.Store(t, plan)
	return plan
}

// errFlatUnsure ends decodeFlat's walk of the members: the general path
// decides.
var errFlatUnsure = errors.New("schema: not sure of a flat decode")

// decodeFlat decodes b into v (a pointer to a flat struct), when it is
// sure to agree with exactUnmarshal.
func decodeFlat(b []byte, v any) bool {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return false
	}
	plan := flatPlan(rv.Elem().Type())
	if len(plan) == 0 || len(b) < 2 || b[0] != '{' {
		return false
	}
	if end, ok := canonValue(b, 0, 0, MaxJSONDepth); !ok || end != len(b) {
		return false
	}
	// Known good: an object, compact, no escaped or duplicated keys. Find
	// every member's field first, then set them, so that a refusal leaves
	// v untouched.
	type member struct {
		f   *flatField
		val []byte
	}
	var set [16]member
	n := 0
	if eachMember(b, func(key, val []byte) error {
		var f *flatField
		for k := range plan {
			if plan[k].name == string(key) {
				f = &plan[k]
				break
			}
		}
		if f == nil || n == len(set) || string(val) == "null" {
			return errFlatUnsure
		}
		switch f.kind {
		case flatString:
			if val[0] != '"' || strings.IndexByte(string(val), '\\') >= 0 {
				return errFlatUnsure
			}
		case flatBool:
			if string(val) != "true" && string(val) != "false" {
				return errFlatUnsure
			}
		}
		set[n] = member{f, val}
		n++
		return nil
	}) != nil {
		return false
	}
	s := rv.Elem()
	for _, m := range set[:n] {
		fv := s.Field(m.f.index)
		switch m.f.kind {
		case flatRaw:
			fv.SetBytes(append([]byte(nil), m.val...))
		case flatBool:
			fv.SetBool(m.val[0] == 't')
		default:
			fv.SetString(string(m.val[1 : len(m.val)-1]))
		}
	}
	return true
}
