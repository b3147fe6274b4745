package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"
)

type jsonFrame struct {
	keys map[string]struct{} // nil for arrays
	key  bool                // in an object, the next token is a key
}

// CheckJSON checks that b is exactly one well-formed JSON value, in valid
// UTF-8, with no duplicated object keys, nested at most maxDepth deep.
// encoding/json silently keeps the last of duplicated keys and replaces
// invalid UTF-8: a log must not store a document two readers could read
// differently.
func CheckJSON(b []byte, maxDepth int) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*jsonFrame
	values := 0
	valueDone := func() {
		if len(stack) == 0 {
			values++
			return
		}
		if top := stack[len(stack)-1]; top.keys != nil {
			top.key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if values > 0 {
			return errors.New("trailing data after JSON value")
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].key {
			if k, ok := tok.(string); ok {
				top := stack[n-1]
				if _, dup := top.keys[k]; dup {
					return fmt.Errorf("duplicated key %q", truncate(k))
				}
				top.keys[k] = struct{}{}
				top.key = false
				continue
			}
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{', '[':
				if len(stack) >= maxDepth {
					return fmt.Errorf("nested deeper than %d levels", maxDepth)
				}
				f := &jsonFrame{}
				if d == '{' {
					f.keys, f.key = map[string]struct{}{}, true
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		default:
			valueDone()
		}
	}
	if values != 1 {
		return errors.New("empty document")
	}
	return checkSurrogates(b)
}

// checkSurrogates refuses a \u escape of a lone UTF-16 surrogate:
// encoding/json reads it as U+FFFD, other readers keep or refuse it. b is
// well-formed JSON, so every backslash starts an escape inside a string.
func checkSurrogates(b []byte) error {
	hex4 := func(i int) rune {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		var r rune
		for _, h := range b[i+2 : i+6] {
			switch {
			case h >= '0' && h <= '9':
				r = r<<4 | rune(h-'0')
			case h >= 'a' && h <= 'f':
				r = r<<4 | rune(h-'a'+10)
			case h >= 'A' && h <= 'F':
				r = r<<4 | rune(h-'A'+10)
			default:
				return -1
			}
		}
		return r
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r := hex4(i)
		switch {
		case r < 0:
			i++ // a two-byte escape
		case r >= 0xDC00 && r <= 0xDFFF:
			return errors.New("lone low surrogate \\u escape")
		case r >= 0xD800 && r <= 0xDBFF:
			if lo := hex4(i + 6); lo < 0xDC00 || lo > 0xDFFF {
				return errors.New("lone high surrogate \\u escape")
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cleanJSONErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// exactUnmarshal is strictUnmarshal for documents of the log (envelopes and
// their data), which are stored as written: encoding/json matches object
// keys to fields case-insensitively, so {"type":"a","Type":"b"} would read
// as "b" here and as "a" in most other readers. It refuses keys that are
// not spelled exactly as a field.
func exactUnmarshal(b []byte, v any) error {
	if err := strictUnmarshal(b, v); err != nil {
		return err
	}
	return exactNames(b, reflect.TypeOf(v), "")
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// exactNames checks that every object key of raw names a field of t exactly.
// raw has already been decoded into t, so only spelling is left to check.
func exactNames(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil // null
		}
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			jsonFields(t, fields)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft := t
			if fields != nil {
				var ok bool
				if ft, ok = fields[k]; !ok {
					return fmt.Errorf("json: unknown field %q", path+k)
				}
			} else {
				ft = t.Elem()
			}
			if err := exactNames(obj[k], ft, path+k+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return nil // null, or []byte as a base64 string
		}
		for _, v := range arr {
			if err := exactNames(v, t.Elem(), path); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields collects the JSON names of struct t's fields, as encoding/json
// names them (tags, embedded structs).
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; !dup {
			out[name] = f.Type
		}
	}
}

func cleanJSONErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Errorf("field %s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("expected %s, got JSON %s", te.Type, te.Value)
	}
	return err
}

// Unmarshal decodes a JSON document into v after CheckJSON, refusing
// unknown fields. Services use it for request bodies.
func Unmarshal(b []byte, v any) error {
	if err := CheckJSON(b, MaxJSONDepth); err != nil {
		return err
	}
	return strictUnmarshal(b, v)
}

// Decode reads a stored event: checks the JSON, refuses a newer schema
// version (ErrNewerSchema), upcasts an older one through the migration
// chain, and decodes the v1 envelope strictly. It does not Validate.
//
// Almost every stored body is exactly what Encode wrote. For such a body
// the strict path (three walks of the document: the duplicate-key and
// UTF-8 check, a version probe, a strict decode with an exact-spelling
// check) can only agree with a plain decode, so Decode first decodes
// plainly, renders the envelope again and compares bytes: equal bytes mean
// valid UTF-8, every key spelled exactly once as a field, nothing unknown.
// The data, kept raw by both paths, is then checked alone. Anything else
// takes the strict path, so both accept and refuse the same bodies.
func Decode(b []byte) (Envelope, error) {
	var e Envelope
	if json.Unmarshal(b, &e) == nil && e.SchemaVersion == Version && len(e.Data) > 0 {
		c := e
		if enc, err := Encode(&c); err == nil && bytes.Equal(enc, b) &&
			CheckJSON(e.Data, MaxJSONDepth-1) == nil {
			return e, nil
		}
	}
	return DecodeStrict(b)
}

// DecodeStrict is Decode without the fast path; tests hold the two to the
// same answers.
func DecodeStrict(b []byte) (Envelope, error) {
	var e Envelope
	if err := CheckJSON(b, MaxJSONDepth); err != nil {
		return e, fmt.Errorf("schema: decode: %w", err)
	}
	// Probe the version by its exact key: v0 documents have none.
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil || probe == nil {
		return e, errors.New("schema: decode: an event is a JSON object")
	}
	v := 0
	if raw, ok := probe["schemaVersion"]; ok {
		if err := json.Unmarshal(raw, &v); err != nil {
			return e, fmt.Errorf("schema: decode: schemaVersion: %w", cleanJSONErr(err))
		}
	}
	if v > Version {
		return e, fmt.Errorf("%w: event has schemaVersion %d, this reader knows %d", ErrNewerSchema, v, Version)
	}
	if v < Version {
		up, err := Upcast(b, v)
		if err != nil {
			return e, err
		}
		b = up
	}
	if err := exactUnmarshal(b, &e); err != nil {
		return e, fmt.Errorf("schema: decode: %w", err)
	}
	return e, nil
}

// Encode renders a stored event. Data defaults to {}.
func Encode(e *Envelope) ([]byte, error) {
	if len(e.Data) == 0 {
		e.Data = json.RawMessage("{}")
	}
	return json.Marshal(e)
}
