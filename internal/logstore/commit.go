package logstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Group commit (docs/adr/008-group-commit.md): the appends of different
// sessions that wait for the same stream at once are sent as one atomic
// batch, so that a server that fsyncs before it acknowledges (sync_interval:
// always) makes one commit for all of them. Each session's messages are
// exactly what Append sends for it alone: its own ids, the per-subject
// expectation on its first message. One batch per stream is in flight;
// what arrives meanwhile waits for it and goes in the next (no timer:
// under light load every append goes at once, alone).
//
// A batch is stored whole or not at all. Refused whole (one session's
// expectation failed, one id was stored already, a limit), its appends are
// sent again at once, each alone, as they would have been without the
// group: each caller gets the answer to its own append, never another
// session's. Unanswered, each caller resolves its own append from the log
// as Append does for any unanswered send.

// groupMaxMsgs is the server's default limit of messages in one atomic
// batch (streamDefaultMaxAtomicBatchSize); groupMaxBytes bounds the bodies
// and headers of one batch, so that one batch's memory and send time stay
// small.
const (
	groupMaxMsgs  = schema.MaxBatchEvents
	groupMaxBytes = 8 << 20
)

// cannotStoreEvery is how often a send waiting for its stream's batch asks
// Config.CannotStore.
const cannotStoreEvery = 100 * time.Millisecond

// pendingSend is one append's messages, waiting for its stream's batch.
type pendingSend struct {
	subject string
	msgs    []*nats.Msg
	size    int
	// done receives the outcome once (buffered).
	done chan sendResult
}

type sendResult struct {
	streamSeq uint64
	dup       bool
	err       error
}

// committer gathers the sends of one stream.
type committer struct {
	s      *Store
	mu     sync.Mutex
	queue  []*pendingSend
	active bool // a goroutine is sending this stream's batches
}

func (s *Store) committerFor(stream string) *committer {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	c := s.committers[stream]
	if c == nil {
		c = &committer{s: s}
		s.committers[stream] = c
	}
	return c
}

// send publishes the messages of one append: alone when group commit is
// off, else in the next batch of its stream. It returns what publish does.
func (s *Store) send(ctx context.Context, stream string, msgs []*nats.Msg) (uint64, bool, error) {
	if s.cfg.NoGroupCommit {
		return s.publish(ctx, msgs)
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := s.cannotStore(); err != nil {
		return 0, false, fmt.Errorf("%w: %w", errRefusedLocally, err)
	}
	p := newPending(msgs)
	c := s.committerFor(stream)
	c.mu.Lock()
	c.queue = append(c.queue, p)
	start := !c.active
	c.active = true
	c.mu.Unlock()
	if start {
		go c.run()
	}
	// A send waiting behind a batch the server does not answer (its disk
	// just filled) is refused as soon as the server is known unable to
	// store, not when that batch times out.
	var tick <-chan time.Time
	if s.cfg.CannotStore != nil {
		t := time.NewTicker(cannotStoreEvery)
		defer t.Stop()
		tick = t.C
	}
	var cause error
	for cause == nil {
		select {
		case r := <-p.done:
			return r.streamSeq, r.dup, r.err
		case <-ctx.Done():
			cause = ctx.Err()
		case <-tick:
			cause = s.cannotStore()
		}
	}
	// Still queued: never sent.
	c.mu.Lock()
	for i, q := range c.queue {
		if q == p {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			c.mu.Unlock()
			return 0, false, fmt.Errorf("%w: waiting for the stream's batch: %w", errRefusedLocally, cause)
		}
	}
	c.mu.Unlock()
	// Sent (or being sent): its outcome is for the batch to say, and
	// comes within the request timeout.
	r := <-p.done
	return r.streamSeq, r.dup, r.err
}

func newPending(msgs []*nats.Msg) *pendingSend {
	p := &pendingSend{subject: msgs[0].Subject, msgs: msgs, done: make(chan sendResult, 1)}
	for _, m := range msgs {
		p.size += msgSize(m)
	}
	return p
}

func msgSize(m *nats.Msg) int {
	n := len(m.Subject) + len(m.Data)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// run sends batches until the queue is empty.
func (c *committer) run() {
	for {
		c.mu.Lock()
		batch := c.take()
		if len(batch) == 0 {
			c.active = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.sendBatch(batch)
	}
}

// take removes from the queue the next batch: the oldest send, and after
// it, in order, every send of another subject while the batch stays
// within groupMaxMsgs and groupMaxBytes. A send of a subject already in
// the batch (or passed over) stays queued, in order: a session's
// expectation can only be met by its previous append, and two of one
// subject in a batch would be refused (10164).
func (c *committer) take() []*pendingSend {
	if len(c.queue) == 0 {
		return nil
	}
	batch := []*pendingSend{c.queue[0]}
	n, size := len(c.queue[0].msgs), c.queue[0].size
	var subjects map[string]bool
	rest := c.queue[:0]
	for _, p := range c.queue[1:] {
		if subjects == nil {
			subjects = map[string]bool{batch[0].subject: true}
		}
		if !subjects[p.subject] && n+len(p.msgs) <= groupMaxMsgs && size+p.size <= groupMaxBytes {
			batch = append(batch, p)
			n += len(p.msgs)
			size += p.size
		} else {
			rest = append(rest, p)
		}
		subjects[p.subject] = true
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	return batch
}

// GroupCommitStats counts the sends of group commit so far: the batches
// (or lone publishes) sent, the appends they carried, and the batches
// refused whole (their appends then sent alone).
func (s *Store) GroupCommitStats() (batches, appends, refused uint64) {
	return s.groupBatches.Load(), s.groupAppends.Load(), s.groupRefused.Load()
}

// sendBatch sends one batch and answers each of its sends.
func (c *committer) sendBatch(batch []*pendingSend) {
	c.s.groupBatches.Add(1)
	c.s.groupAppends.Add(uint64(len(batch)))
	// The batch is every caller's: bounded by the request timeout, not
	// by any one caller's context.
	ctx := context.Background()
	if len(batch) == 1 {
		c.sendAlone(ctx, batch[0])
		return
	}
	var msgs []*nats.Msg
	for _, p := range batch {
		msgs = append(msgs, p.msgs...)
	}
	last, _, err := c.s.publish(ctx, msgs)
	if err == nil {
		// An atomic batch is stored contiguously, in order.
		seq := last - uint64(len(msgs))
		for _, p := range batch {
			seq += uint64(len(p.msgs))
			p.done <- sendResult{streamSeq: seq}
		}
		return
	}
	if classify(err) == unknown {
		for _, p := range batch {
			p.done <- sendResult{err: err}
		}
		return
	}
	// Refused whole: nothing stored. Each append again, alone, at once.
	c.s.groupRefused.Add(1)
	c.s.log.Debug("logstore: group commit refused, sending each append alone", "appends", len(batch), "err", err)
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sendAlone(ctx, p)
		}()
	}
	wg.Wait()
}

func (c *committer) sendAlone(ctx context.Context, p *pendingSend) {
	seq, dup, err := c.s.publish(ctx, p.msgs)
	p.done <- sendResult{streamSeq: seq, dup: dup, err: err}
}
