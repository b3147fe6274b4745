package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

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
	// json.Unmarshal ignores unknown keys; exactNames refuses them (and
	// keys spelled in another case), so together they are strictUnmarshal
	// with exact spelling, at one decode.
	if decodeFlat(b, v) {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return cleanJSONErr(err)
	}
	return exactNames(b, reflect.TypeOf(v), "")
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// typeFields caches, per struct type, its fields by JSON name.
var typeFields sync.Map // reflect.Type -> map[string]fieldInfo

// fieldInfo is a struct field's type, and whether its values can hold
// object keys to check (needsNames).
type fieldInfo struct {
	t      reflect.Type
	nested bool
}

func fieldsOf(t reflect.Type) map[string]fieldInfo {
	if f, ok := typeFields.Load(t); ok {
		return f.(map[string]fieldInfo)
	}
	types := map[string]reflect.Type{}
	jsonFields(t, types)
	f := make(map[string]fieldInfo, len(types))
	for name, ft := range types {
		f[name] = fieldInfo{ft, needsNames(ft)}
	}
	typeFields.Store(t, f)
	return f
}

// exactNames checks that every object key of raw names a field of t exactly.
// raw has already been decoded into t (so it is valid JSON of t's shape),
// and only spelling is left to check.
func exactNames(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := fieldsOf(t)
		return eachMember(raw, func(k, v []byte) error {
			f, ok := fields[string(k)]
			if !ok {
				return fmt.Errorf("json: unknown field %q", path+string(k))
			}
			if !f.nested {
				// Nothing to check below: no path to build either.
				return nil
			}
			return exactNames(v, f.t, path+string(k)+".")
		})
	case reflect.Map:
		et := t.Elem()
		if !needsNames(et) {
			return nil
		}
		return eachMember(raw, func(k, v []byte) error { return exactNames(v, et, path+string(k)+".") })
	case reflect.Slice, reflect.Array:
		et := t.Elem()
		if !needsNames(et) {
			return nil
		}
		return eachElem(raw, func(v []byte) error { return exactNames(v, et, path) })
	}
	return nil
}

// needsNames reports whether values of t can hold object keys to check.
func needsNames(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return t.Kind() != reflect.Interface
	}
	return false
}

// eachMember calls fn with each key (unescaped) and raw value of the JSON
// object raw, which must be valid JSON; anything else (null) has none. The
// key is valid during the call only: a key without escapes is raw's bytes,
// no string made per member.
func eachMember(raw []byte, fn func(key, val []byte) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		end := skipString(raw, i)
		key := raw[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(raw[i:end], &k); err != nil {
				return err
			}
			key = []byte(k)
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		vend := SkipValue(raw, i)
		if err := fn(key, raw[i:vend]); err != nil {
			return err
		}
		i = skipSpace(raw, vend)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return nil
}

// eachElem calls fn with each raw element of the JSON array raw (valid
// JSON); anything else (null, a base64 string) has none.
func eachElem(raw []byte, fn func(val []byte) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != ']' {
		end := SkipValue(raw, i)
		if err := fn(raw[i:end]); err != nil {
			return err
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i]
// (len(b) when it is not closed). Its closing quote is the first quote
// after an even run of backslashes: found with bytes.IndexByte, not a
// byte at a time (the search index skips every message's text so).
func skipString(b []byte, i int) int {
	start := i + 1
	for i = start; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			break
		}
		q += i
		k := q
		for k > start && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return len(b)
}

// SkipValue returns the index after the JSON value at b[i] of valid JSON
// b: after a string's closing quote or a container's closing bracket, at
// the delimiter or white space that ends a number or literal; len(b) when
// b ends first (a string or container not closed), and i when b[i] is
// white space or i is past b.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
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
	e, _, err := DecodeCanonical(b)
	return e, err
}

// DecodeCanonical is Decode that also says whether b is canonical: exactly
// the bytes Encode writes for the event it decodes to. A copier may then
// edit the body in place of encoding the event again.
func DecodeCanonical(b []byte) (e Envelope, canonical bool, err error) {
	if e, ok := decodeCanonical(b); ok {
		return e, true, nil
	}
	return decodeOther(b)
}

// DecodeCanonicalShared is DecodeCanonical whose event's Data may be a
// part of b rather than a copy of it (capped: an append to it copies), for
// a caller that owns b and leaves it unchanged while the event is used: a
// consumer that gets each message in a buffer of its own saves an
// allocation and a copy of the data per event.
func DecodeCanonicalShared(b []byte) (e Envelope, canonical bool, err error) {
	return DecodeCanonicalSharedOf(b, "")
}

// DecodeCanonicalSharedOf is DecodeCanonicalShared of a body stored as
// an event of session sessionID (a consumer reads the session from the
// subject): an event that names it has the string sessionID as its
// SessionID rather than a copy of the body's, one allocation fewer.
func DecodeCanonicalSharedOf(b []byte, sessionID string) (e Envelope, canonical bool, err error) {
	if e, ok := decodeCanonicalData(b, false, sessionID); ok {
		return e, true, nil
	}
	return decodeOther(b)
}

// DecodeCanonicalViewOf is DecodeCanonicalSharedOf whose event id and
// turn, step, attempt and tool call ids are views of b too when b is
// canonical (no copy): a caller that keeps any of them past its use of b
// (a reader's fold state does) copies it, and one that sees the same id
// event after event (a turn's) keeps a single copy of it. They are
// strings of their own when b is not canonical.
func DecodeCanonicalViewOf(b []byte, sessionID string) (e Envelope, canonical bool, err error) {
	if e, ok := decodeCanonicalAs(b, false, true, sessionID); ok {
		return e, true, nil
	}
	return decodeOther(b)
}

// decodeOther is DecodeCanonical for a body decodeCanonical is not sure
// of. Its own function: the envelope it decodes into escapes to the heap,
// which would cost every decode an allocation if it were e of
// DecodeCanonical.
func decodeOther(b []byte) (e Envelope, canonical bool, err error) {
	if json.Unmarshal(b, &e) == nil && e.SchemaVersion == Version && len(e.Data) > 0 {
		c := e
		if enc, err := Encode(&c); err == nil && bytes.Equal(enc, b) &&
			CheckJSON(e.Data, MaxJSONDepth-1) == nil {
			return e, true, nil
		}
	}
	e, err = DecodeStrict(b)
	return e, false, err
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

// Encode renders a stored event: json.Marshal of the envelope. Data
// defaults to {}.
func Encode(e *Envelope) ([]byte, error) {
	return AppendEncode(nil, e)
}

// AppendEncode appends Encode(e) to dst (a request of many events is
// written in one buffer, not one per event). On error dst is returned as
// it was.
func AppendEncode(dst []byte, e *Envelope) ([]byte, error) {
	if len(e.Data) == 0 {
		e.Data = json.RawMessage("{}")
	}
	if dst == nil {
		dst = make([]byte, 0, encodedSize(e))
	}
	n := len(dst)
	if b, ok := appendCanonical(dst, e); ok {
		return b, nil
	}
	enc, err := json.Marshal(e)
	if err != nil {
		return dst[:n], err
	}
	return append(dst[:n], enc...), nil
}
