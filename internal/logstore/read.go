package logstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// readInactiveThreshold is how long the server keeps a read's consumer
// after its last pull if the delete at the end of the read is lost.
const readInactiveThreshold = 15 * time.Second

// ErrUnreadable marks a stored message that is not its session's next
// event (Judge's *UnreadableError is one): retrying the read changes
// nothing.
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

// ReadSessionTo is ReadSession up to tail, the session's tail as Tail
// read it from the stream leader before (or while) another read went: the
// forker reads its parent's tail while it loads the parent's snapshot,
// one round trip instead of two before the scan.
func (s *Store) ReadSessionTo(ctx context.Context, sessionID string, afterStreamSeq uint64, tail Tail, fn func(*Msg) error) (Tail, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return Tail{}, err
	}
	return s.readUpTo(ctx, loc, sessionID, afterStreamSeq, tail, fn)
}

// ErrReadStalled marks a read that got no answer from the cluster for
// readAttempts stalls in a row (a node paused or crashed with the
// replies): nothing is wrong with the session, and a retry may succeed.
var ErrReadStalled = errors.New("logstore: read stalled")

// readAttempts bounds the stalls in a row (no event read in between) a
// read takes before it gives up with ErrReadStalled.
const readAttempts = 3

// readStall is how long a read's consumer may deliver nothing while the
// leader's tail says more is there before the read drops it and starts
// over from the last event it read: a consumer whose stream leader or
// consumer leader went away with its replies otherwise waits for the
// caller's deadline (a fork's is half an hour).
func (s *Store) readStall() time.Duration { return 2 * s.cfg.RequestTimeout }

// readUpTo is ReadSession after the tail was read.
//
// Every call it makes to the cluster is bounded (a leader read by the
// request timeout, a consumer by readStall): a stalled call is retried
// from the last event read, and after readAttempts stalls in a row the
// read ends with ErrReadStalled. At the first stall of a row it asks
// whether the session has an erasure record now (erasedUnderRead): an
// erase under way deletes the events the read waits for, and a retry
// would only wait for them again, so the read ends at once with code
// erased. It asks again at the next stall of the row only if that
// question got no answer.
func (s *Store) readUpTo(ctx context.Context, loc Location, sessionID string, afterStreamSeq uint64, tail Tail, fn func(*Msg) error) (Tail, error) {
	cur := afterStreamSeq
	var last error
	asked := false // the erasure record was asked for, with an answer, in this row of stalls
	for stalls := 0; cur < tail.StreamSeq; {
		if stalls == readAttempts {
			return tail, fmt.Errorf("logstore: read %s after stream seq %d (tail at %d): %w: %w", sessionID, cur, tail.StreamSeq, ErrReadStalled, last)
		}
		var (
			at   uint64
			done bool
			err  error
		)
		// Short remainders: a few leader reads beat creating a consumer.
		if tail.Seq > 0 && tail.Seq <= 8 {
			at, done, err = s.readLeaderUpTo(ctx, sessionID, cur, tail, fn)
		} else {
			at, done, err = s.readConsumerUpTo(ctx, loc, sessionID, cur, tail, fn)
		}
		if done || err == nil {
			return tail, err
		}
		if ctx.Err() != nil {
			return tail, ctx.Err()
		}
		if at > cur {
			cur, stalls, asked = at, 0, false
		}
		stalls++
		last = err
		if !asked {
			var erased error
			if asked, erased = s.erasedUnderRead(ctx, sessionID, cur, tail); erased != nil {
				return tail, erased
			}
		}
	}
	return tail, nil
}

// erasedUnderRead asks whether a read of the session stalled after
// stream seq cur because the session was erased: its erasure record is
// written before any of its events is deleted (erase.go), and read from
// the bucket's leader (ErasureOf), so a read that waits for deleted
// events finds it. erased is the read's end (code erased, as a sealed
// body whose key is gone reads) when the record is there; answered is
// false when the question got no answer (the cluster that stalled the
// read may not answer it either).
func (s *Store) erasedUnderRead(ctx context.Context, sessionID string, cur uint64, tail Tail) (answered bool, erased error) {
	e, _, err := s.ErasureOf(ctx, sessionID)
	if err != nil {
		return false, nil
	}
	if e == nil {
		return true, nil
	}
	return true, schema.Errorf(schema.CodeErased, "session %s was erased while it was read (erased at %s; the read had given its events up to stream seq %d, the tail at %d)", sessionID, e.ErasedAt, cur, tail.StreamSeq)
}

// readLeaderUpTo reads the session after stream seq cur up to the tail
// with leader reads, one per event. It returns the stream seq of the last
// event handed to fn, and done with the read's result when it ended (fn
// stopped it or failed, the events end short of the tail, a sealed body
// did not open); otherwise err is a leader read that failed, which a
// retry from there may not.
func (s *Store) readLeaderUpTo(ctx context.Context, sessionID string, cur uint64, tail Tail, fn func(*Msg) error) (uint64, bool, error) {
	for cur < tail.StreamSeq {
		m, err := s.NextAfter(ctx, sessionID, cur)
		if openFailed(err) {
			return cur, true, err // the message's answer, as the consumer's read gives it
		}
		if err != nil {
			return cur, false, err
		}
		if m == nil || m.StreamSeq > tail.StreamSeq {
			return cur, true, fmt.Errorf("logstore: %s: stored events end before the tail at stream seq %d", sessionID, tail.StreamSeq)
		}
		if err := fn(m); err != nil {
			return cur, true, stopped(err)
		}
		cur = m.StreamSeq
	}
	return cur, true, nil
}

// stopped is fn's error as the read returns it: nil for ErrStop.
func stopped(err error) error {
	if err == ErrStop {
		return nil
	}
	return err
}

// readPrefetchBytes bounds the bytes a read's consumer pulls ahead of its
// reader: a thousand messages of up to an event's size each (256 KiB by
// default, more when configured) would hold a quarter of a gigabyte per
// read while the reader is slower than the server (an HTTP client reading
// /events slowly, a fork writing its copy). It stays above one message's
// largest size (MaxEventBytes plus headers), which must fit in one pull.
func (s *Store) readPrefetchBytes() int { return max(8<<20, s.cfg.MaxEventBytes+128<<10) }

// readConsumerUpTo is readLeaderUpTo with an ordered consumer: it creates
// one from stream seq cur+1 (the creation bounded by the request timeout)
// and reads until the tail, failing (done false) when the consumer
// delivers nothing for readStall.
func (s *Store) readConsumerUpTo(ctx context.Context, loc Location, sessionID string, cur uint64, tail Tail, fn func(*Msg) error) (uint64, bool, error) {
	// An ordered consumer outlives Stop on the server for its inactive
	// threshold (nats.go's default is 5 minutes), and a stream takes at
	// most 1000 consumers by default (nats-server 2.11+): folds at a few
	// per second then exhaust the stream's consumers and every read fails
	// (err 10026). Keep the threshold short and delete the consumer once
	// the read is done.
	//
	// The consumer's own recovery (a new consumer after missed
	// heartbeats) retries without end by default, each try waiting ten
	// seconds for its answer: one try, and the stall bound does the rest.
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	cons, err := s.js.OrderedConsumer(cctx, loc.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{loc.Subject},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       cur + 1,
		InactiveThreshold: readInactiveThreshold,
		MaxResetAttempts:  1,
	})
	cancel()
	if err != nil {
		return cur, false, fmt.Errorf("logstore: read %s: %w", sessionID, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(1000, s.readPrefetchBytes()))
	if err != nil {
		s.dropReadConsumer(loc, cons)
		return cur, false, fmt.Errorf("logstore: read %s: %w", sessionID, err)
	}
	defer func() {
		it.Stop()
		s.dropReadConsumer(loc, cons)
	}()
	stall := s.readStall()
	w := newStallWatch(ctx, stall)
	defer w.stop()
	for {
		w.waiting()
		jm, err := it.Next(jetstream.NextContext(w.ctx))
		if err != nil {
			if ctx.Err() != nil {
				return cur, true, ctx.Err()
			}
			if w.stalled() || errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no event for %v at stream seq %d", stall, cur)
			}
			return cur, false, fmt.Errorf("logstore: read %s: %w", sessionID, err)
		}
		md, err := jm.Metadata()
		if err != nil {
			return cur, true, err
		}
		m := &Msg{StreamSeq: md.Sequence.Stream, Subject: jm.Subject(), Header: jm.Headers(), Data: jm.Data()}
		if m.StreamSeq > tail.StreamSeq {
			return cur, true, nil
		}
		if err := s.open(ctx, m); err != nil {
			return cur, true, err
		}
		if err := fn(m); err != nil {
			return cur, true, stopped(err)
		}
		cur = m.StreamSeq
		if cur == tail.StreamSeq {
			return cur, true, nil
		}
	}
}

// stallWatch bounds each wait of a read for its next message by stall,
// as a context.WithTimeout per wait would, with one timer for the whole
// read: a wait records when it began (one clock read), and the timer,
// when it fires, cancels ctx only if the wait under way began stall ago
// or more, else fires again when it will have. A timeout per message
// costs a context, a timer and its start and stop on every message of
// every read (BenchmarkStallWatch).
type stallWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  time.Duration
	start  time.Time
	since  atomic.Int64 // when the wait under way began, in ns after start
	timer  *time.Timer
}

// errReadStall is the cause of a stallWatch's cancelled ctx.
var errReadStall = errors.New("logstore: no message for the read's stall bound")

func newStallWatch(parent context.Context, stall time.Duration) *stallWatch {
	w := &stallWatch{stall: stall, start: time.Now()}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	w.timer = time.AfterFunc(stall, w.check)
	return w
}

// waiting marks the start of a wait for the next message.
func (w *stallWatch) waiting() { w.since.Store(int64(time.Since(w.start))) }

func (w *stallWatch) check() {
	waited := time.Since(w.start) - time.Duration(w.since.Load())
	if waited >= w.stall {
		w.cancel(errReadStall)
		return
	}
	w.timer.Reset(w.stall - waited)
}

// stalled reports whether a wait lasted stall.
func (w *stallWatch) stalled() bool { return context.Cause(w.ctx) == errReadStall }

func (w *stallWatch) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// dropReadConsumer deletes a read's consumer in the background, bounded:
// the server would drop it after readInactiveThreshold anyway.
func (s *Store) dropReadConsumer(loc Location, cons jetstream.Consumer) {
	ci := cons.CachedInfo()
	if ci == nil || ci.Name == "" {
		return
	}
	name := ci.Name
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.js.DeleteConsumer(dctx, loc.Stream, name)
	}()
}

// Event is a decoded stored event with its stream position.
type Event struct {
	schema.Envelope
	StreamSeq uint64
}

// ReadEvents reads the events of the session stored after
// afterStreamSeq, judged from its start (ReadJudged): a session that
// holds an unreadable message gives the events before it and its
// *UnreadableError.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, afterStreamSeq uint64) ([]Event, Tail, error) {
	var out []Event
	tail, err := s.ReadJudged(ctx, &Judge{SessionID: sessionID}, func(m *Msg, e *schema.Envelope) error {
		if m.StreamSeq > afterStreamSeq {
			out = append(out, Event{Envelope: *e, StreamSeq: m.StreamSeq})
		}
		return nil
	})
	return out, tail, err
}
