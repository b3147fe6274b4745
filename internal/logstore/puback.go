package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishOne sends one message to JetStream and waits for its
// acknowledgement: jetstream.PublishMsg without retries, whose answer is
// read by readPubAck rather than by encoding/json (the acknowledgement of
// every one-event append; a reflective decode of it was a visible share of
// the append path).
func (s *Store) publishOne(ctx context.Context, m *nats.Msg) (seq uint64, dup bool, err error) {
	if err = ctx.Err(); err != nil {
		return 0, false, err
	}
	// A deadline in ctx bounds the wait by itself; without one the wait is
	// RequestTimeout on the reply slot's timer (a context with a timeout
	// per append would cost a timer and two allocations more).
	timeout := s.cfg.RequestTimeout
	if _, ok := ctx.Deadline(); ok {
		timeout = 0
	}
	resp, err := s.replies.Request(ctx, m, timeout)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, false, jetstream.ErrNoStreamResponse
		}
		return 0, false, err
	}
	return readPubAck(resp.Data)
}

// readPubAck reads a JetStream publish answer: {"stream":..,"seq":..} with
// an optional "duplicate":true (and "domain"), or {"error":{..}}. Flat
// acknowledgements are read by hand; anything else goes through
// encoding/json.
func readPubAck(b []byte) (seq uint64, dup bool, err error) {
	if seq, dup, ok := readFlatPubAck(b); ok {
		return seq, dup, nil
	}
	var r struct {
		Error     *jetstream.APIError `json:"error"`
		Stream    string              `json:"stream"`
		Seq       uint64              `json:"seq"`
		Duplicate bool                `json:"duplicate"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return 0, false, fmt.Errorf("nats: %w", r.Error)
	}
	if r.Stream == "" {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	return r.Seq, r.Duplicate, nil
}

// readFlatPubAck reads an acknowledgement that is one flat object of
// strings without escapes, unsigned integers and booleans, with a
// non-empty stream and a seq; ok is false for anything else (errors,
// nesting, escapes, other literals), which encoding/json then reads.
func readFlatPubAck(b []byte) (seq uint64, dup bool, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, false, false
	}
	i = skipWS(b, i+1)
	var stream, haveSeq bool
	if i < len(b) && b[i] == '}' {
		return 0, false, false // no stream
	}
	for {
		key, n := plainString(b, i)
		if n < 0 {
			return 0, false, false
		}
		i = skipWS(b, n)
		if i >= len(b) || b[i] != ':' {
			return 0, false, false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return 0, false, false
		}
		if b[i] == '"' {
			v, n := plainString(b, i)
			if n < 0 {
				return 0, false, false
			}
			switch string(key) {
			case "stream":
				stream = len(v) > 0
			case "seq", "duplicate":
				return 0, false, false
			}
			i = n
		} else {
			start := i
			for i < len(b) && b[i] >= 'a' && b[i] <= 'z' || i < len(b) && b[i] >= '0' && b[i] <= '9' {
				i++
			}
			lit := b[start:i]
			switch {
			case isUint(lit):
				if string(key) == "seq" {
					v, err := strconv.ParseUint(string(lit), 10, 64)
					if err != nil {
						return 0, false, false
					}
					seq, haveSeq = v, true
				} else if string(key) == "duplicate" || string(key) == "stream" {
					return 0, false, false
				}
			case string(lit) == "true" || string(lit) == "false":
				switch string(key) {
				case "duplicate":
					dup = string(lit) == "true"
				case "seq", "stream":
					return 0, false, false
				}
			default:
				return 0, false, false
			}
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, false, false
		}
		if b[i] == '}' {
			i++
			break
		}
		if b[i] != ',' {
			return 0, false, false
		}
		i = skipWS(b, i+1)
	}
	if skipWS(b, i) != len(b) || !stream || !haveSeq {
		return 0, false, false
	}
	return seq, dup, true
}

// isUint reports whether b is a JSON number that is an unsigned integer
// (no leading zero, sign, fraction or exponent).
func isUint(b []byte) bool {
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the string at b[i] if it has no escape: its contents
// and the index after it, or n < 0.
func plainString(b []byte, i int) (s []byte, n int) {
	if i >= len(b) || b[i] != '"' {
		return nil, -1
	}
	end := bytes.IndexByte(b[i+1:], '"')
	if end < 0 {
		return nil, -1
	}
	s = b[i+1 : i+1+end]
	for _, c := range s {
		if c == '\\' || c < 0x20 {
			return nil, -1 // an escape, or a byte JSON refuses
		}
	}
	return s, i + end + 2
}
