package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cleanJSONErr(err)
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
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

type versionProbe struct {
	SchemaVersion *int `json:"schemaVersion"`
}

// Decode reads a stored event: checks the JSON, refuses a newer schema
// version (ErrNewerSchema), upcasts an older one through the migration
// chain, and decodes the v1 envelope strictly. It does not Validate.
func Decode(b []byte) (Envelope, error) {
	var e Envelope
	if err := CheckJSON(b, MaxJSONDepth); err != nil {
		return e, fmt.Errorf("schema: decode: %w", err)
	}
	var p versionProbe
	if err := json.Unmarshal(b, &p); err != nil {
		return e, fmt.Errorf("schema: decode: %w", cleanJSONErr(err))
	}
	v := 0
	if p.SchemaVersion != nil {
		v = *p.SchemaVersion
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
	if err := strictUnmarshal(b, &e); err != nil {
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
