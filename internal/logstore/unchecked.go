package logstore

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"iter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// uncheckedWindow is how many PublishUnchecked acks may be awaited at
// once (nats.go's default limit of async publishes in flight).
const uncheckedWindow = 4000

// PublishUnchecked stores events straight in their sessions' subjects, as
// Append would send each alone but with no sequence expectation: it fills
// streams for tests and benchmarks fast (plain async publishes, far faster
// than atomic batches on a file-storage stream), and stores what the
// writer would refuse (gaps, forged seqs). Each event is chained as Append
// chains it: its SL-Prev is ChainHash of the body stored before it in its
// session (the one published before it in this call, or the session's
// last stored message, read once per session and call), none for a
// session's first message (a stored tail whose sealed body does not open
// fails the call with the judge's verdict on it, code unreadable, as the
// writer answers; nothing of that session is stored); so what it stores
// is judged as the writer's own events are, and only the seqs it was
// given can break the chain (calls must not publish to one session at the
// same time: each chains to what it read and published itself). It
// returns the stream sequence of the last event stored. The cached tails
// of those sessions are dropped.
//
// It never stores a session's event before one published before it.
// nats.go sends an async publish answered "no responders" (the stream
// has no leader, or its new leader's interest has not reached this
// server yet) again 250 ms later while the publishes after it go ahead,
// which would store them first: so the async publishes are never sent
// again, and any of them that fails fails the call (the events published
// after it may be stored: a gap, never an event out of order); and the
// first event of each stream in a call is published synchronously, asked
// again while the stream is unreachable (its message id makes a second
// copy a duplicate), so that
// a stream just made, or electing its leader, is waited for rather than
// failing the call. Reading each session's stored tail is asked again
// while unreachable too.
func (s *Store) PublishUnchecked(ctx context.Context, events iter.Seq[schema.Envelope]) (uint64, error) {
	var last uint64
	futs := make([]jetstream.PubAckFuture, 0, uncheckedWindow)
	wait := func() error {
		for _, fu := range futs {
			select {
			case ack := <-fu.Ok():
				last = max(last, ack.Sequence)
			case err := <-fu.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futs = futs[:0]
		return nil
	}
	// prevs: each session's chain hash after the events published so far.
	prevs := map[string]string{}
	// answered: the streams that took a synchronous publish in this call.
	answered := map[string]bool{}
	for e := range events {
		loc, err := s.Locate(e.SessionID)
		if err != nil {
			return last, err
		}
		prev, ok := prevs[e.SessionID]
		if !ok {
			// The stream holds every earlier call's events: each waits
			// for all its acks before it returns.
			m, err := WhileUnreachable(ctx, 0, nil, func(ctx context.Context) (*Msg, error) {
				return s.msgGet(ctx, loc.Stream, msgGetRequest{LastFor: loc.Subject})
			})
			var ue *UnreadableError
			if errors.As(err, &ue) {
				// The tail's sealed body does not open: no SL-Prev can
				// follow it. The judge's verdict, as the writer answers
				// an append there; nothing of the session is stored.
				return last, ue
			}
			if err != nil {
				return last, fmt.Errorf("logstore: last message of %s: %w", e.SessionID, err)
			}
			if m != nil {
				prev = ChainHash(m.Data)
			}
		}
		msgs, hash, err := s.chain(&AppendRequest{SessionID: e.SessionID, Events: []schema.Envelope{e}}, loc.Subject, prev)
		if err != nil {
			return last, err
		}
		m := msgs[0]
		delete(m.Header, HeaderExpectedSeq)
		prevs[e.SessionID] = hash
		if s.cfg.SealBodies {
			// The session's key first, asked again while its bucket is
			// unreachable, as the stream's first publish is.
			if _, err := WhileUnreachable(ctx, s.cfg.RequestTimeout, nil, func(ctx context.Context) (cipher.AEAD, error) {
				return s.sessionKey(ctx, e.SessionID, true)
			}); err != nil {
				return last, err
			}
		}
		if msgs, err = s.sealed(ctx, e.SessionID, msgs); err != nil {
			return last, err
		}
		m = msgs[0]
		s.tails.Remove(e.SessionID)
		if !answered[loc.Stream] {
			ack, err := WhileUnreachable(ctx, s.cfg.RequestTimeout, nil, func(ctx context.Context) (*jetstream.PubAck, error) {
				return s.js.PublishMsg(ctx, m)
			})
			if err != nil {
				return last, fmt.Errorf("logstore: publish to %s: %w", loc.Stream, err)
			}
			answered[loc.Stream] = true
			last = max(last, ack.Sequence)
			continue
		}
		fu, err := s.js.PublishMsgAsync(m, jetstream.WithRetryAttempts(0))
		if err != nil {
			return last, err
		}
		futs = append(futs, fu)
		if len(futs) == uncheckedWindow {
			if err := wait(); err != nil {
				return last, err
			}
		}
	}
	return last, wait()
}
