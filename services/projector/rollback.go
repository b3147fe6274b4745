package projector

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Rolled back (DESIGN.md section 5): the projector keeps, per stream, the
// last stream sequence it has consumed (its checkpoints, from start on)
// and raises log_rolled_back when a stream's last sequence goes below it.
// JetStream never lowers a stream's last sequence (deleting or purging
// messages keeps it), so that is the log losing messages it had stored
// and delivered: a node restored from an older copy, writes a power loss
// dropped, a truncated block file. The flag stays raised until the
// projector restarts; /readyz answers not ready with the reason, the
// metric sessionlog_projector_log_rolled_back is 1 and the dashboard shows
// a banner (from /v1/overview's rolledBack). What nats-server says it lost
// of a stream when it recovered its files raises it too (lost.go).

// rollbackEvery is how often the running projector compares the streams'
// last sequences with what it consumed.
const rollbackEvery = 2 * time.Second

// rollbackConfirm is how long a running projector sees a stream's last
// sequence below what it consumed before it raises log_rolled_back. A node
// woken from a pause longer than an election still believes it leads and
// answers the stream's info from its old state until it hears the new
// leader (within an election timeout, at most 9 s in nats-server): one
// such answer is not the log losing messages. A loss the writers overtake
// within that time is still told: the message at the consumed sequence is
// then another one than the projector consumed.
const rollbackConfirm = 10 * time.Second

// CodeLogRolledBack names the condition in /readyz and /v1/overview.
const CodeLogRolledBack = "log_rolled_back"

type rollbacks struct {
	// ls and log: the log the checks read, and where they say what they
	// found.
	ls       rollbackLog
	log      *slog.Logger
	gauge    prometheus.Gauge
	mu       sync.Mutex
	consumed map[string]store.StreamPos // stream -> highest position consumed
	suspects map[string]suspect         // stream -> a last sequence seen below it
	gone     map[string]suspect         // stream -> a consumed message found gone
	reasons  map[string]string          // stream -> why it is rolled back
	// lost: when the server's records of what it lost were last read
	// (lost.go).
	lost lostRead
}

// suspect is a stream whose last sequence was seen below pos, first at
// since and at every check after.
type suspect struct {
	pos   store.StreamPos
	since time.Time
}

func newRollbacks(r prometheus.Registerer, ls rollbackLog, log *slog.Logger) (*rollbacks, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionlog_projector_log_rolled_back",
		Help: "1 when the log lost stored events: a stream's last sequence went below one the projector had consumed, a message it consumed is gone or another, or nats-server says it lost stored messages."})
	if err := r.Register(g); err != nil {
		return nil, fmt.Errorf("projector: metrics: %w", err)
	}
	return &rollbacks{ls: ls, log: log, gauge: g, consumed: map[string]store.StreamPos{}, suspects: map[string]suspect{}, gone: map[string]suspect{}, reasons: map[string]string{}}, nil
}

// saw records the positions of a checkpoint as consumed.
func (rb *rollbacks) saw(cp store.Checkpoint) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for _, p := range cp.Streams {
		if p.Seq >= rb.consumed[p.Name].Seq {
			rb.consumed[p.Name] = p
		}
	}
}

// snapshot is what was consumed of each stream so far.
func (rb *rollbacks) snapshot() map[string]store.StreamPos {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return maps.Clone(rb.consumed)
}

// check compares a stream's last sequence, read after c was consumed of
// it (a snapshot taken before the read: the projector may consume more
// meanwhile), with c, and raises at once (at start: nothing consumed yet
// depends on the answer but the views, which a rebuild makes again).
func (rb *rollbacks) check(name string, last, c uint64) {
	if last < c {
		rb.raise(name, fmt.Sprintf("stream %s ends at seq %d, but the projector consumed it up to seq %d: the log lost %d stored messages", name, last, c, c-last))
	}
}

// raise marks stream name rolled back for reason, unless it already is;
// it reports whether it was not.
func (rb *rollbacks) raise(name, reason string) bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	first := rb.reasons[name] == ""
	if first {
		rb.reasons[name] = reason
		rb.gauge.Set(1)
	}
	delete(rb.suspects, name)
	delete(rb.gone, name)
	return first
}

// reason is empty unless a stream rolled back.
func (rb *rollbacks) reason() string {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if len(rb.reasons) == 0 {
		return ""
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(rb.reasons)) {
		out = append(out, rb.reasons[name])
	}
	return CodeLogRolledBack + ": " + strings.Join(out, "; ")
}

// CheckStreams compares every stream's last sequence with what was
// consumed, now (the running projector does it every rollbackEvery), and
// reads what the server says it lost of it when due (lost.go); a stream
// created again since (another creation time) restarts its sequences and
// is not compared.
func (s *Service) CheckStreams(ctx context.Context) {
	consumed := s.rb.snapshot()
	infos, err := s.streams(ctx)
	if err != nil {
		return // unreachable now: the next round looks again
	}
	now := time.Now()
	s.rb.checkLostDue(ctx, infos, now)
	for name, info := range infos {
		if c, ok := s.created[name]; ok && c.Equal(info.created) {
			s.rb.checkStream(ctx, name, info.last, consumed[name], now)
		}
	}
	s.rb.mu.Lock()
	gone := maps.Clone(s.rb.gone)
	s.rb.mu.Unlock()
	for name, g := range gone {
		if g.pos.Seq != consumed[name].Seq { // else checkStream looked at it above
			s.rb.checkConsumed(ctx, name, g.pos, now)
		}
	}
}

// checkStream judges one stream whose last sequence was read as last
// after c was consumed of it. Below c, it is a suspect until it has stayed
// below for rollbackConfirm (a stale answer ends sooner); at or past c,
// the message at the consumed (or suspected) sequence must be the one
// consumed: another one there is the log that lost messages and stored
// others in their place. A message gone (erased, expired) says nothing.
func (rb *rollbacks) checkStream(ctx context.Context, name string, last uint64, c store.StreamPos, now time.Time) {
	rb.mu.Lock()
	sus, suspected := rb.suspects[name]
	if suspected && c.Seq > sus.pos.Seq {
		sus.pos = c
	}
	if last < c.Seq || (suspected && last < sus.pos.Seq) {
		if !suspected {
			rb.suspects[name] = suspect{pos: c, since: now}
			rb.mu.Unlock()
			rb.log.Warn("projector: a stream's last sequence is below what was consumed; it is raised as rolled back unless a later answer shows more", "stream", name, "last", last, "consumed", c.Seq, "within", rollbackConfirm)
			return
		}
		rb.suspects[name] = sus
		rb.mu.Unlock()
		if now.Sub(sus.since) >= rollbackConfirm {
			rb.check(name, last, sus.pos.Seq)
		}
		return
	}
	delete(rb.suspects, name)
	rb.mu.Unlock()
	p := c
	if suspected {
		p = sus.pos
	}
	if p.Seq == 0 || p.ID == "" {
		return
	}
	if rb.checkConsumed(ctx, name, p, now) && suspected {
		rb.log.Info("projector: a stream's last sequence below what was consumed was a stale answer: the message consumed is there", "stream", name, "seq", p.Seq, "last", last)
	}
}

// checkConsumed reads the message at consumed position p and judges it:
// gone (missing), or there (found). It reports whether the message consumed
// is there; false too when the read failed (the next round looks again).
func (rb *rollbacks) checkConsumed(ctx context.Context, name string, p store.StreamPos, now time.Time) bool {
	m, err := rb.ls.MsgAt(ctx, name, p.Seq)
	switch {
	case err != nil:
		return false
	case m == nil:
		rb.missing(ctx, name, p, now)
		return false
	}
	return rb.found(name, p, m)
}

// found judges the message m read at a consumed position p: it must be
// the one consumed there, else the log lost stored messages and stored
// others in their place. It reports whether it was.
func (rb *rollbacks) found(name string, p store.StreamPos, m *logstore.Msg) bool {
	rb.mu.Lock()
	if g, ok := rb.gone[name]; ok && g.pos.Seq == p.Seq {
		delete(rb.gone, name) // a stale "not found"
	}
	rb.mu.Unlock()
	if id := msgIdentity(m.Subject, m.Header); id != p.ID {
		rb.raise(name, fmt.Sprintf("stream %s holds %s at seq %d, but the projector consumed %s there: the log lost stored messages and stored others in their place", name, id, p.Seq, p.ID))
		return false
	}
	return true
}

// missing judges a consumed message the stream no longer holds. Only an
// erase deletes a stored event, and it writes the session's erasure
// record first; so a message whose session has no record is the log that
// lost it (nats-server cuts a block file at a damaged record and serves
// the stream without what followed, keeping the stream's last sequence
// when later blocks hold more). A former leader cut off by a partition
// also answers "not found" for what was stored after it lost touch, until
// it steps down: the message must stay gone for rollbackConfirm. A
// position without its subject (a checkpoint written before it was kept)
// is not judged.
func (rb *rollbacks) missing(ctx context.Context, name string, p store.StreamPos, now time.Time) {
	id, ok := logstore.SessionFromSubject(p.Subject)
	if !ok {
		return
	}
	if erased, err := rb.ls.Erased(ctx, id); err != nil || erased {
		if erased {
			rb.mu.Lock()
			if g, ok := rb.gone[name]; ok && g.pos.Seq == p.Seq {
				delete(rb.gone, name)
			}
			rb.mu.Unlock()
		}
		return
	}
	rb.mu.Lock()
	g, ok := rb.gone[name]
	if !ok {
		rb.gone[name] = suspect{pos: p, since: now}
		rb.mu.Unlock()
		rb.log.Warn("projector: a message the projector consumed is gone from the stream and its session has no erasure record; it is raised as rolled back unless it is found again", "stream", name, "seq", p.Seq, "session", id, "within", rollbackConfirm)
		return
	}
	rb.mu.Unlock()
	if g.pos.Seq == p.Seq && now.Sub(g.since) >= rollbackConfirm {
		rb.raise(name, fmt.Sprintf("stream %s no longer holds seq %d (%s of session %s), which the projector consumed, and the session has no erasure record: the log lost stored messages", name, p.Seq, p.ID, id))
	}
}

// msgIdentity names a stored message: its Nats-Msg-Id (the event id),
// else its subject.
func msgIdentity(subject string, h nats.Header) string {
	if v := h[logstore.HeaderMsgID]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return subject
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
