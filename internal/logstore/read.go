package logstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// readInactiveThreshold is how long the server keeps a read's consumer
// after its last pull if the delete at the end of the read is lost.
const readInactiveThreshold = 15 * time.Second

// ErrUnreadable marks a stored message of a session that is not an event
// (it does not decode): retrying the read changes nothing.
var ErrUnreadable = errors.New("logstore: stored message is not an event")

// ReadSession calls fn for each stored event of the session with stream
// sequence > afterStreamSeq, in order, up to the tail the stream leader
// reported when the read began. It returns that tail. fn may return
// ErrStop to end early.
func (s *Store) ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*Msg) error) (Tail, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return Tail{}, err
	}
	tail, err := s.Tail(ctx, sessionID)
	if err != nil {
		return Tail{}, err
	}
	return s.readUpTo(ctx, loc, sessionID, afterStreamSeq, tail, fn)
}

// readUpTo is ReadSession after the tail was read.
func (s *Store) readUpTo(ctx context.Context, loc Location, sessionID string, afterStreamSeq uint64, tail Tail, fn func(*Msg) error) (Tail, error) {
	if tail.StreamSeq <= afterStreamSeq {
		return tail, nil
	}
	// Short remainders: a few leader reads beat creating a consumer.
	if tail.Seq > 0 && tail.Seq <= 8 {
		cur := afterStreamSeq
		for cur < tail.StreamSeq {
			m, err := s.NextAfter(ctx, sessionID, cur)
			if err != nil {
				return tail, err
			}
			if m == nil || m.StreamSeq > tail.StreamSeq {
				return tail, fmt.Errorf("logstore: %s: stored events end before the tail at stream seq %d", sessionID, tail.StreamSeq)
			}
			if err := fn(m); err != nil {
				if err == ErrStop {
					return tail, nil
				}
				return tail, err
			}
			cur = m.StreamSeq
		}
		return tail, nil
	}
	// An ordered consumer outlives Stop on the server for its inactive
	// threshold (nats.go's default is 5 minutes), and a stream takes at
	// most 1000 consumers by default (nats-server 2.11+): folds at a few
	// per second then exhaust the stream's consumers and every read fails
	// (err 10026). Keep the threshold short and delete the consumer once
	// the read is done.
	cons, err := s.js.OrderedConsumer(ctx, loc.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{loc.Subject},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       afterStreamSeq + 1,
		InactiveThreshold: readInactiveThreshold,
	})
	if err != nil {
		return tail, fmt.Errorf("logstore: read %s: %w", sessionID, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return tail, fmt.Errorf("logstore: read %s: %w", sessionID, err)
	}
	defer func() {
		it.Stop()
		if ci := cons.CachedInfo(); ci != nil && ci.Name != "" {
			name := ci.Name
			go func() {
				dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = s.js.DeleteConsumer(dctx, loc.Stream, name)
			}()
		}
	}()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			it.Stop()
		case <-done:
		}
	}()
	for {
		jm, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return tail, ctx.Err()
			}
			return tail, fmt.Errorf("logstore: read %s: %w", sessionID, err)
		}
		md, err := jm.Metadata()
		if err != nil {
			return tail, err
		}
		m := &Msg{StreamSeq: md.Sequence.Stream, Subject: jm.Subject(), Header: jm.Headers(), Data: jm.Data()}
		if m.StreamSeq > tail.StreamSeq {
			return tail, nil
		}
		if err := fn(m); err != nil {
			if err == ErrStop {
				return tail, nil
			}
			return tail, err
		}
		if m.StreamSeq == tail.StreamSeq {
			return tail, nil
		}
	}
}

// Event is a decoded stored event with its stream position.
type Event struct {
	schema.Envelope
	StreamSeq uint64
}

// ReadEvents decodes every event of the session after afterStreamSeq.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, afterStreamSeq uint64) ([]Event, Tail, error) {
	var out []Event
	tail, err := s.ReadSession(ctx, sessionID, afterStreamSeq, func(m *Msg) error {
		e, err := schema.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("logstore: %s at stream seq %d: %w", sessionID, m.StreamSeq, err)
		}
		out = append(out, Event{Envelope: e, StreamSeq: m.StreamSeq})
		return nil
	})
	return out, tail, err
}
