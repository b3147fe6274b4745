package logstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
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
// SL-Seq, SL-Schema, SL-Prev: about 130 bytes with a 36-byte event id).
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
//
// The batch is read without headers: the server would otherwise write
// six headers into every message and the reader parse them. ReadChained
// is ReadBatch with the headers a reader needs to check the hash chain.
func (s *Store) ReadBatch(ctx context.Context, sessionID string, tail Tail, afterSeq uint64, n, maxBytes int) ([][]byte, error) {
	c, err := s.readBatch(ctx, sessionID, tail, afterSeq, n, maxBytes, false)
	return c.Bodies, err
}

// Chained is a run of a session's stored events as ReadChained returns
// it: each body with its SL-Prev header, and the hash the first one must
// carry.
type Chained struct {
	// PrevHash is ChainHash of the stored body of the event before the
	// first ("" when the first is the session's seq 1).
	PrevHash string
	// Bodies are the events' stored bodies, oldest first.
	Bodies [][]byte
	// Prevs[i] is Bodies[i]'s SL-Prev header ("" when it has none).
	Prevs []string
	// LeadStreamSeq is the stream seq of the event before the first (0:
	// none, or not known); FirstStreamSeq and LastStreamSeq those of the
	// first and the last body.
	LeadStreamSeq, FirstStreamSeq, LastStreamSeq uint64
	// Held is how many messages the subject held from the lead on (from
	// the first body without a lead) when the server answered the
	// batch: those it sent and those it counted after them. 0 when the
	// batch was not read in one answer.
	Held int64
}

// ReadChained is ReadBatch for a reader that checks the hash chain
// (DESIGN.md section 2): each body comes with its SL-Prev header, and
// with afterSeq > 0 the batch starts one event earlier, at event
// afterSeq, whose body is hashed (PrevHash) and not returned. Each
// message's SL-Seq header, when it has one, must be its body's seq, as
// the judge holds it (else ErrNotOnePerSeq). maxBytes counts the
// returned bodies only.
//
// The headers cost the server six more per message and the reader their
// parsing; the event before the first costs one more body in the batch.
func (s *Store) ReadChained(ctx context.Context, sessionID string, tail Tail, afterSeq uint64, n, maxBytes int) (Chained, error) {
	return s.readBatch(ctx, sessionID, tail, afterSeq, n, maxBytes, true)
}

func (s *Store) readBatch(ctx context.Context, sessionID string, tail Tail, afterSeq uint64, n, maxBytes int, chained bool) (Chained, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return Chained{}, err
	}
	if afterSeq >= tail.Seq || n <= 0 {
		return Chained{}, nil
	}
	if tail.Seq > tail.StreamSeq {
		return Chained{}, ErrNotOnePerSeq
	}
	c := &collector{afterSeq: afterSeq, n: int(min(uint64(n), tail.Seq-afterSeq)), maxBytes: maxBytes, chained: chained}
	if chained && afterSeq > 0 {
		c.lead = 1
	}
	after, err := s.seekSeq(ctx, loc, tail, afterSeq-uint64(c.lead))
	if err != nil {
		return Chained{}, err
	}
	last, complete := s.batchGet(ctx, loc, after, c)
	if complete {
		return c.out, nil
	}
	c.out.Held = 0 // not one answer
	// The rest from the leader, checked as the batch was: after the last
	// event the batch gave if it is known, else (or if that goes wrong:
	// events lost at the end of the answer) all of it.
	if last != 0 {
		err := s.readLeader(ctx, loc, sessionID, tail, last, c)
		if err == nil {
			return c.out, nil
		}
		if !errors.Is(err, ErrNotOnePerSeq) {
			return Chained{}, err
		}
	}
	c.reset()
	if err := s.readLeader(ctx, loc, sessionID, tail, after, c); err != nil {
		return Chained{}, err
	}
	return c.out, nil
}

// collector gathers a batched read's events in seq order: with lead 1
// first event afterSeq (hashed, not kept), then afterSeq+1, ..., until it
// holds n bodies or they reach maxBytes.
type collector struct {
	afterSeq    uint64
	n, maxBytes int
	chained     bool // keep each body's SL-Prev
	lead        int  // 1: event afterSeq comes first, for its hash

	seen int // messages taken, the lead included
	size int // of the bodies kept
	out  Chained
}

func (c *collector) reset() {
	c.seen, c.size, c.out = 0, 0, Chained{}
}

// next is the seq of the event the collector takes next.
func (c *collector) next() uint64 { return c.afterSeq + 1 + uint64(c.seen) - uint64(c.lead) }

// add takes the next stored message, stored at streamSeq (hdr nil and
// streamSeq 0: read without headers); false when it is not the event of
// the next seq, whose SL-Seq header (when it has one) says so too.
func (c *collector) add(body []byte, hdr nats.Header, streamSeq uint64) bool {
	seq, ok := seqOfBody(body)
	if !ok || seq != c.next() {
		return false
	}
	if h := hdr.Get(HeaderSeq); h != "" {
		if hs, err := strconv.ParseUint(h, 10, 64); err != nil || hs != seq {
			return false
		}
	}
	c.seen++
	if c.seen <= c.lead {
		c.out.PrevHash, c.out.LeadStreamSeq = ChainHash(body), streamSeq
		return true
	}
	if len(c.out.Bodies) == 0 {
		c.out.FirstStreamSeq = streamSeq
	}
	c.out.LastStreamSeq = streamSeq
	c.out.Bodies = append(c.out.Bodies, body)
	if c.chained {
		c.out.Prevs = append(c.out.Prevs, hdr.Get(HeaderPrev))
	}
	c.size += len(body)
	return true
}

// full reports whether the collector holds all it was asked for.
func (c *collector) full() bool {
	return len(c.out.Bodies) == c.n || (c.maxBytes > 0 && c.size >= c.maxBytes)
}

// readLeader is readBatch's events read from the leader into c, from the
// message after stream seq after, which must be event c.next().
func (s *Store) readLeader(ctx context.Context, loc Location, sessionID string, tail Tail, after uint64, c *collector) error {
	_, err := s.readUpTo(ctx, loc, sessionID, after, tail, func(m *Msg) error {
		if !c.add(m.Data, m.Header, m.StreamSeq) {
			return ErrNotOnePerSeq
		}
		if c.full() {
			return ErrStop
		}
		return nil
	})
	return err
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

// batchGet reads c's events (the first being event c.next()) from the
// message after stream seq after with one batched direct get, into c. It
// takes the prefix of the answer that is those events in order; complete
// is false when c is not full after it (a stale replica, a lost message,
// an error). last is then the stream seq of the prefix's last event, 0
// when that is not known.
//
// Unless c keeps each body's SL-Prev, the batch is asked without
// headers: the server would otherwise write six headers into every
// message and the reader parse them, which costs more than the rest of
// the read. The bodies carry their seqs, and the end of the batch says
// the stream seq of its last message.
//
// The server stops a batch at its max_bytes counting each message's
// subject and stored headers besides its body: it is asked for maxBytes
// and an allowance per event for those, so that it does not stop before
// the bodies reach maxBytes (if it does, the leader reads the rest). A
// lead event, which maxBytes does not count, is allowed the mean body of
// a batch that reaches maxBytes.
func (s *Store) batchGet(ctx context.Context, loc Location, after uint64, c *collector) (last uint64, complete bool) {
	batch := c.n + c.lead
	// A store that seals asks for the headers too: a sealed body opens
	// only with its SL-Seal and Nats-Msg-Id (without them it does not
	// decode, and every batch was read again from the leader).
	req := directGetRequest{Seq: after + 1, NextFor: loc.Subject, Batch: batch, NoHeaders: !c.chained && !s.cfg.SealBodies}
	if c.maxBytes > 0 {
		perEvent := len(loc.Subject) + len(loc.Subject) + batchHeaderAllowance // Nats-Msg-Id holds the session id
		req.MaxBytes = c.maxBytes + batch*perEvent + c.lead*(c.maxBytes/c.n)
	}
	msgs, eob, err := s.directBatch(ctx, loc.Stream, req)
	if s.cfg.FaultHook != nil && s.cfg.FaultHook(FaultBatch) != nil {
		msgs, eob = nil, nil // as a replica that holds none of them yet answers
	}
	if c.chained && err == nil && eob != nil && len(msgs) > 0 {
		if np, perr := strconv.ParseUint(eob.Header.Get(numPendingHeader), 10, 64); perr == nil {
			c.out.Held = int64(len(msgs)) + int64(np)
		}
	}
	for _, m := range msgs {
		var streamSeq uint64
		if c.chained {
			streamSeq, _ = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		}
		body := m.Data
		if Sealed(m.Header) {
			om := &Msg{StreamSeq: streamSeq, Subject: loc.Subject, Header: m.Header, Data: m.Data}
			if s.open(ctx, om) != nil {
				return 0, false // the leader's read says why
			}
			body = om.Data
		}
		if !c.add(body, m.Header, streamSeq) {
			return 0, false
		}
		if c.full() {
			return 0, true
		}
	}
	if err != nil || eob == nil || c.seen == 0 {
		return 0, false
	}
	last, err = strconv.ParseUint(eob.Header.Get(jetstream.LastSequenceHeader), 10, 64)
	if err != nil || last <= after {
		return 0, false
	}
	return last, false
}

// FaultBatch runs when a batched direct get of ReadBatch or ReadChained
// has its answer: a non-nil error from the hook makes the answer count
// as holding none of the events, as one from a replica behind the leader,
// so the leader is read instead.
const FaultBatch FaultStage = "batch"

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
