package writer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// scanner is schema's JSON scanner with the steps that read the fields
// of an append request.
type scanner struct {
	schema.JSONScanner
	// bodies, when not nil, gets each event's bytes when they are exactly
	// what schema.Encode writes for it (nil for any other event).
	bodies *[][]byte
}

// decodeAppend parses an append request in one pass with the checks of
// schema.Unmarshal (one JSON value, valid UTF-8, no duplicated key, depth
// bound, no unknown field) and stricter key matching: a key must be
// spelled exactly as the contract names it (encoding/json would also take
// "SessionId"). Event data stays a sub-slice of b. It replaces
// schema.Unmarshal + encoding/json on the hot path; a fuzz test holds it
// to encoding/json's results.
func decodeAppend(b []byte, req *AppendRequest) error {
	return decodeAppendBodies(b, req, nil)
}

// decodeAppendBodies is decodeAppend that also sets *bodies (when not
// nil) to each event's canonical body, a sub-slice of b, or nil where the
// event is not written as schema.Encode writes it: an event a client
// encoded with schema.Encode (pkg/client does) can be stored as it came,
// not encoded again. A canonical event is read by position
// (schema.CanonicalEventAt), which is sure of it only where this decoder
// would accept it too (FuzzDecodeAppendBodies holds the two equal).
func decodeAppendBodies(b []byte, req *AppendRequest, bodies *[][]byte) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	p := &scanner{JSONScanner: schema.JSONScanner{B: b, MaxDepth: schema.MaxJSONDepth}, bodies: bodies}
	p.WS()
	if p.I == len(p.B) {
		return errors.New("empty document")
	}
	if p.null() { // as encoding/json: a null request is an empty one
		p.WS()
		if p.I != len(p.B) {
			return errors.New("trailing data after JSON value")
		}
		return nil
	}
	err := p.fields(0, func(key []byte, start int) error {
		switch string(key) {
		case "sessionId":
			return p.strField(&req.SessionID)
		case "holder":
			return p.strField(&req.Holder)
		case "takeover":
			return p.boolField(&req.Takeover)
		case "expectedSeq":
			if p.null() {
				req.ExpectedSeq = nil
				return nil
			}
			var n uint64
			if err := p.uintField(&n); err != nil {
				return err
			}
			req.ExpectedSeq = &n
			return nil
		case "events":
			if p.null() {
				req.Events = nil
				return nil
			}
			return p.events(req)
		}
		return fmt.Errorf("json: unknown field %q", key)
	})
	if err != nil {
		return err
	}
	p.WS()
	if p.I != len(p.B) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// fields scans an object at depth, calling f with each key positioned at
// its value; f must consume the value. Keys are compared raw: a key with
// an escape is refused as unknown unless f knows it (none of the contract
// names need one) — but duplicates are still detected on decoded keys.
func (p *scanner) fields(depth int, f func(key []byte, start int) error) error {
	if p.I >= len(p.B) || p.B[p.I] != '{' {
		return p.Errf("expected an object")
	}
	if depth >= p.MaxDepth {
		return fmt.Errorf("nested deeper than %d levels", p.MaxDepth)
	}
	p.I++
	p.WS()
	if p.I < len(p.B) && p.B[p.I] == '}' {
		p.I++
		return nil
	}
	var seen [16][]byte
	n := 0
	for {
		p.WS()
		if p.I >= len(p.B) || p.B[p.I] != '"' {
			return p.Errf("expected object key")
		}
		raw, esc, err := p.Str()
		if err != nil {
			return err
		}
		key := raw[1 : len(raw)-1]
		if esc {
			var k string
			if err := json.Unmarshal(raw, &k); err != nil {
				return p.Errf("invalid key: %v", err)
			}
			key = []byte(k)
		}
		for _, s := range seen[:n] {
			if bytes.Equal(s, key) {
				return fmt.Errorf("duplicated key %q", schema.Clip(string(key), 40))
			}
		}
		if n == len(seen) {
			return errors.New("too many keys")
		}
		seen[n] = key
		n++
		p.WS()
		if p.I >= len(p.B) || p.B[p.I] != ':' {
			return p.Errf("expected :")
		}
		p.I++
		p.WS()
		if p.I >= len(p.B) {
			return p.Errf("unexpected end")
		}
		if err := f(key, p.I); err != nil {
			return err
		}
		if done, err := p.Sep('}', "object"); done || err != nil {
			return err
		}
	}
}

func (p *scanner) null() bool {
	if len(p.B)-p.I >= 4 && string(p.B[p.I:p.I+4]) == "null" {
		p.I += 4
		return true
	}
	return false
}

func (p *scanner) strField(dst *string) error {
	if p.null() {
		return nil
	}
	if p.B[p.I] != '"' {
		return p.Errf("expected a string")
	}
	raw, esc, err := p.Str()
	if err != nil {
		return err
	}
	if !esc {
		*dst = string(raw[1 : len(raw)-1])
		return nil
	}
	return json.Unmarshal(raw, dst)
}

func (p *scanner) numLit() ([]byte, error) {
	start := p.I
	if c := p.B[p.I]; c != '-' && (c < '0' || c > '9') {
		return nil, p.Errf("expected a number")
	}
	if err := p.Number(); err != nil {
		return nil, err
	}
	return p.B[start:p.I], nil
}

func (p *scanner) uintField(dst *uint64) error {
	if p.null() {
		return nil
	}
	lit, err := p.numLit()
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(string(lit), 10, 64)
	if err != nil {
		return fmt.Errorf("json: cannot unmarshal number %s into uint64", lit)
	}
	*dst = n
	return nil
}

func (p *scanner) intField(dst *int) error {
	if p.null() {
		return nil
	}
	lit, err := p.numLit()
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(string(lit), 10, 0)
	if err != nil {
		return fmt.Errorf("json: cannot unmarshal number %s into int", lit)
	}
	*dst = int(n)
	return nil
}

func (p *scanner) boolField(dst *bool) error {
	switch {
	case p.null():
	case p.Lit("true") == nil:
		*dst = true
	case p.Lit("false") == nil:
		*dst = false
	default:
		return p.Errf("expected a boolean")
	}
	return nil
}

func (p *scanner) events(req *AppendRequest) error {
	if p.B[p.I] != '[' {
		return p.Errf("events must be an array")
	}
	p.I++
	p.WS()
	if p.I < len(p.B) && p.B[p.I] == ']' {
		p.I++
		req.Events = []schema.Envelope{}
		return nil
	}
	req.Events = make([]schema.Envelope, 0, 1) // most appends are one event
	for {
		p.WS()
		if len(req.Events) > schema.MaxBatchEvents {
			// Enough to refuse the request; the rest is still scanned so a
			// malformed document is reported as such.
			if err := p.Value(2); err != nil {
				return err
			}
		} else {
			req.Events = append(req.Events, schema.Envelope{})
			if err := p.event(&req.Events[len(req.Events)-1]); err != nil {
				return err
			}
		}
		if done, err := p.Sep(']', "array"); done || err != nil {
			return err
		}
	}
}

// event reads one event: by position when it is canonical and its body
// is wanted, else by envelope.
func (p *scanner) event(e *schema.Envelope) error {
	if p.bodies == nil {
		return p.envelope(e)
	}
	// The data of an event is at depth 3: in the request, its events
	// array and the event.
	c, end, ok := schema.CanonicalEventAt(p.B, p.I, 3, p.MaxDepth)
	if !ok {
		*p.bodies = append(*p.bodies, nil)
		return p.envelope(e)
	}
	*e = c
	*p.bodies = append(*p.bodies, p.B[p.I:end:end])
	p.I = end
	return nil
}

func (p *scanner) envelope(e *schema.Envelope) error {
	if p.I >= len(p.B) || p.B[p.I] != '{' {
		if p.null() {
			return nil
		}
		return p.Errf("an event must be an object")
	}
	return p.fields(2, func(key []byte, start int) error {
		switch string(key) {
		case "schemaVersion":
			return p.intField(&e.SchemaVersion)
		case "sessionId":
			return p.strField(&e.SessionID)
		case "seq":
			return p.uintField(&e.Seq)
		case "eventId":
			return p.strField(&e.EventID)
		case "time":
			if p.null() {
				return nil
			}
			if p.B[p.I] != '"' {
				return p.Errf("time must be a string")
			}
			raw, _, err := p.Str()
			if err != nil {
				return err
			}
			var t time.Time
			if err := t.UnmarshalJSON(raw); err != nil {
				return err
			}
			e.Time = t
			return nil
		case "type":
			return p.strField(&e.Type)
		case "turnId":
			return p.strField(&e.TurnID)
		case "stepId":
			return p.strField(&e.StepID)
		case "attemptId":
			return p.strField(&e.AttemptID)
		case "toolCallId":
			return p.strField(&e.ToolCallID)
		case "ignorable":
			return p.boolField(&e.Ignorable)
		case "synthetic":
			return p.boolField(&e.Synthetic)
		case "data":
			if err := p.Value(3); err != nil {
				return err
			}
			e.Data = json.RawMessage(p.B[start:p.I])
			return nil
		}
		return fmt.Errorf("json: unknown field %q", key)
	})
}
