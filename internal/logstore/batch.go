package logstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ErrNotOnePerSeq marks a session whose stored messages do not carry its
// seqs 1..n one each in stream order (messages written around the
// writers): ReadBatch cannot find an event by its seq; read the session
// from its start instead.
var ErrNotOnePerSeq = errors.New("logstore: the session's messages are not one per seq")

// maxSeekProbes bounds the leader reads ReadBatch spends finding where an
// event lies among other sessions' messages.
const maxSeekProbes = 64

// batchHeaderAllowance is what batchGet allows for an event's stored
// headers besides its session id (Nats-Msg-Id's event id, SL-Type,
// SL-Seq, SL-Schema).
const batchHeaderAllowance = 160

// ReadBatch returns the bodies of the session's stored events with seq
// > afterSeq, oldest first, up to tail (which the caller read from the
// leader with Tail): at most n, and fewer only when they reach maxBytes
// (the one that reaches it included, so never none).
//
// The events up to a tail the leader reported are immutable, so they are
// read with one batched direct get, which any replica may answer. The
// answer is used only as far as it carries seqs afterSeq+1, afterSeq+2,
// ... up to the tail's: a replica that does not hold all of them yet (R3
// followers apply after the leader) or an answer cut short is completed
// from the leader, never returned short as if it were all.
//
// The event's place in the stream is found from the tail: a session
// stored alone holds event k at stream seq tail.StreamSeq-(tail.Seq-k);
// among other sessions' messages a few leader reads narrow it down. A
// session without one message per seq gives ErrNotOnePerSeq.
func (s *Store) ReadBatch(ctx context.Context, sessionID string, tail Tail, afterSeq uint64, n, maxBytes int) ([][]byte, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	if afterSeq >= tail.Seq || n <= 0 {
		return nil, nil
	}
	if tail.Seq > tail.StreamSeq {
		return nil, ErrNotOnePerSeq
	}
	after, err := s.seekSeq(ctx, loc, tail, afterSeq)
	if err != nil {
		return nil, err
	}
	n = int(min(uint64(n), tail.Seq-afterSeq))
	bodies, size, last, complete := s.batchGet(ctx, loc, after, afterSeq, n, maxBytes)
	if complete {
		return bodies, nil
	}
	// The rest from the leader, checked as the batch was: after the last
	// event the batch gave if it is known, else (or if that goes wrong:
	// events lost at the end of the answer) all of it.
	if last != 0 {
		more, err := s.readLeader(ctx, loc, sessionID, tail, last, afterSeq+uint64(len(bodies)), n-len(bodies), maxBytes-size)
		if err == nil {
			return append(bodies, more...), nil
		}
		if !errors.Is(err, ErrNotOnePerSeq) {
			return nil, err
		}
	}
	return s.readLeader(ctx, loc, sessionID, tail, after, afterSeq, n, maxBytes)
}

// readLeader is ReadBatch's events read from the leader, from the message
// after stream seq after, which must be event afterSeq+1.
func (s *Store) readLeader(ctx context.Context, loc Location, sessionID string, tail Tail, after, afterSeq uint64, n, maxBytes int) ([][]byte, error) {
	var bodies [][]byte
	size := 0
	_, err := s.readUpTo(ctx, loc, sessionID, after, tail, func(m *Msg) error {
		if seq, ok := seqOfMsg(m); !ok || seq != afterSeq+uint64(len(bodies))+1 {
			return ErrNotOnePerSeq
		}
		bodies = append(bodies, m.Data)
		size += len(m.Data)
		if len(bodies) == n || (maxBytes > 0 && size >= maxBytes) {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return bodies, nil
}

// seekSeq returns a stream seq after which the session's first message
// is event afterSeq+1, assuming one message per seq (batchGet checks it).
//
// Event k lies at a stream seq of at least k (each event before it takes
// one) and at most tail.StreamSeq-(tail.Seq-k) (each after it takes one):
// the two meet for a session stored alone. Otherwise each probe (the
// leader's first message of the session from a stream seq, guessed by
// interpolating between what the probes saw) narrows the range.
func (s *Store) seekSeq(ctx context.Context, loc Location, tail Tail, afterSeq uint64) (uint64, error) {
	if afterSeq == 0 {
		return 0, nil
	}
	k := afterSeq + 1
	lo, hi := k, tail.StreamSeq-(tail.Seq-k)
	// What probes saw below and above event k: stream seq and seq.
	loStream, loSeq, hiStream, hiSeq := uint64(0), uint64(0), tail.StreamSeq+1, tail.Seq+1
	for probes := 0; lo < hi; probes++ {
		if probes == maxSeekProbes {
			return 0, ErrNotOnePerSeq
		}
		// Interpolate, and halve the range every other probe so that an
		// uneven spread cannot make the search linear.
		x := loStream + uint64(float64(hiStream-loStream)*float64(k-loSeq)/float64(hiSeq-loSeq))
		if probes%2 == 1 {
			x = lo + (hi-lo)/2
		}
		x = min(max(x, lo), hi)
		m, err := s.msgGet(ctx, loc.Stream, msgGetRequest{Seq: x, NextFor: loc.Subject})
		if err != nil {
			return 0, fmt.Errorf("logstore: read %s: %w", loc.Subject, err)
		}
		if m == nil {
			return 0, ErrNotOnePerSeq
		}
		q, ok := seqOfMsg(m)
		switch {
		case !ok || (q > k && q-k >= m.StreamSeq):
			return 0, ErrNotOnePerSeq
		case q == k:
			return m.StreamSeq - 1, nil
		case q < k:
			// Events q+1..k follow it, one stream seq each at least.
			lo, loStream, loSeq = max(lo, m.StreamSeq+(k-q)), m.StreamSeq, q
		default:
			// No message of the session lies in x..m.StreamSeq-1, and
			// events k+1..q-1 precede it.
			hi, hiStream, hiSeq = min(hi, x-1, m.StreamSeq-(q-k)), m.StreamSeq, q
		}
	}
	if lo > hi {
		return 0, ErrNotOnePerSeq
	}
	return lo - 1, nil
}

// batchGet reads the bodies of the session's n events after stream seq
// after (the first being seq afterSeq+1) with one batched direct get. It
// returns the prefix of the answer that is those events in order and the
// size of their bodies; complete is false when that prefix is short of n
// events and of maxBytes (a stale replica, a lost message, an error).
// last is then the stream seq of the prefix's last event, 0 when that is
// not known.
//
// The batch is asked without headers: the server would otherwise write
// six headers into every message and the reader parse them, which costs
// more than the rest of the read. The bodies carry their seqs, and the
// end of the batch says the stream seq of its last message.
//
// The server stops a batch at its max_bytes counting each message's
// subject and stored headers besides its body: it is asked for maxBytes
// and an allowance per event for those, so that it does not stop before
// the bodies reach maxBytes (if it does, the leader reads the rest).
func (s *Store) batchGet(ctx context.Context, loc Location, after, afterSeq uint64, n, maxBytes int) (bodies [][]byte, size int, last uint64, complete bool) {
	req := directGetRequest{Seq: after + 1, NextFor: loc.Subject, Batch: n, NoHeaders: true}
	if maxBytes > 0 {
		perEvent := len(loc.Subject) + len(loc.Subject) + batchHeaderAllowance // Nats-Msg-Id holds the session id
		req.MaxBytes = maxBytes + n*perEvent
	}
	msgs, eob, err := s.directBatch(ctx, loc.Stream, req)
	bodies = make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		if seq, ok := seqOfBody(m.Data); !ok || seq != afterSeq+uint64(len(bodies))+1 {
			return bodies, size, 0, false
		}
		bodies = append(bodies, m.Data)
		size += len(m.Data)
		if len(bodies) == n || (maxBytes > 0 && size >= maxBytes) {
			return bodies, size, 0, true
		}
	}
	if err != nil || eob == nil || len(bodies) == 0 {
		return bodies, size, 0, false
	}
	last, err = strconv.ParseUint(eob.Header.Get(jetstream.LastSequenceHeader), 10, 64)
	if err != nil || last <= after {
		return bodies, size, 0, false
	}
	return bodies, size, last, false
}

// seqOfMsg is a stored event's seq, from its SL-Seq header or else its
// body.
func seqOfMsg(m *Msg) (uint64, bool) {
	if n, err := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64); err == nil {
		return n, true
	}
	return seqOfBody(m.Data)
}

// seqOfBody is the seq in a stored event's body: read by position from a
// body laid out as Encode writes it, else decoded.
func seqOfBody(b []byte) (uint64, bool) {
	if c, ok := schema.ScanCanonical(b); ok {
		return c.Seq, true
	}
	e, err := schema.Decode(b)
	return e.Seq, err == nil
}
