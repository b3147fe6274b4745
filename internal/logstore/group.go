package logstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// GroupPart is one session's part of a grouped append: its request and
// the messages Messages built for it (Req.Bodies, if set, holding the same
// bodies, so that appending the request alone sends the very same
// messages).
type GroupPart struct {
	Req  *AppendRequest
	Msgs []*nats.Msg
}

// SendOutcome is what a failed append attempt left stored.
type SendOutcome int

const (
	// SendRefused: nothing was stored, and sending the same again is
	// refused again (a session's check failed, an id is stored already).
	SendRefused SendOutcome = iota
	// SendRetry: nothing was stored; sending the same again may be taken
	// (no leader yet, too many batches in flight, not sent at all).
	SendRetry
	// SendUnknown: sent, and no answer came: all of it may be stored, or
	// none.
	SendUnknown
)

// ClassifySend says what the failed attempt that returned err (not nil)
// stored, by the error's JetStream code: the one classifier of append
// errors.
func ClassifySend(err error) SendOutcome {
	var se *schema.Error
	if errors.As(err, &se) {
		// Refused with a contract code before anything was sent.
		return SendRefused
	}
	switch classify(err) {
	case retrying:
		return SendRetry
	case unknown:
		return SendUnknown
	}
	return SendRefused
}

// AppendGroup sends the appends of several sessions as one atomic batch,
// once, and returns each part's result in order. Every session's messages
// are exactly what Append sends for its request (its own ids, the
// per-subject expectation on its first), so a grouped batch stores what
// the single appends would have, all or nothing. The sessions must differ
// and be of one stream, and the batch hold at most schema.MaxBatchEvents
// messages.
//
// A failed group is not resolved here: ClassifySend says whether anything
// may be stored, and the caller appends the parts alone (Append resolves
// each by its ids).
func (s *Store) AppendGroup(ctx context.Context, parts []GroupPart) ([]AppendResult, error) {
	if len(parts) == 0 {
		return nil, schema.Errorf(schema.CodeBadRequest, "no appends to group")
	}
	var (
		msgs   []*nats.Msg
		stream string
		seen   = make(map[string]struct{}, len(parts))
	)
	for i, p := range parts {
		if len(p.Msgs) == 0 || len(p.Msgs) != len(p.Req.Events) {
			return nil, schema.Errorf(schema.CodeBadRequest, "group part %d: %d messages for %d events", i, len(p.Msgs), len(p.Req.Events))
		}
		loc, err := s.Locate(p.Req.SessionID)
		if err != nil {
			return nil, err
		}
		if _, dup := seen[p.Req.SessionID]; dup {
			return nil, schema.Errorf(schema.CodeBadRequest, "session %s twice in one group", p.Req.SessionID)
		}
		seen[p.Req.SessionID] = struct{}{}
		if i == 0 {
			stream = loc.Stream
		} else if loc.Stream != stream {
			return nil, schema.Errorf(schema.CodeBadRequest, "a group spans streams %s and %s", stream, loc.Stream)
		}
		sealed, err := s.sealed(ctx, p.Req.SessionID, p.Msgs)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, sealed...)
	}
	if len(msgs) > schema.MaxBatchEvents {
		return nil, schema.Errorf(schema.CodeTooLarge, "%d events in one group, at most %d", len(msgs), schema.MaxBatchEvents)
	}
	last, _, err := s.publish(ctx, msgs)
	if err != nil {
		return nil, fmt.Errorf("logstore: grouped append of %d sessions: %w", len(parts), err)
	}
	// An atomic batch is stored contiguously, in order.
	out := make([]AppendResult, len(parts))
	seq := last - uint64(len(msgs))
	for i, p := range parts {
		seq += uint64(len(p.Msgs))
		out[i] = AppendResult{FirstSeq: p.Req.Events[0].Seq, LastSeq: p.Req.Events[len(p.Req.Events)-1].Seq, StreamSeq: seq}
		for _, m := range p.Msgs {
			out[i].Bytes += len(m.Data)
		}
		s.committed(*p.Req, out[i])
	}
	return out, nil
}
