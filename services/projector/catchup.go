package projector

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// catchUpLog is what the projector's start, catch-up and erasure watch
// read of the log, beside what its fold reads (foldLog) and the messages
// its consumers deliver: the streams, where each ends and when it was
// created (StreamStatus), the last message each still holds (the
// catch-up's target), and the erased ids as their records are written.
// logstore.Store is it on JetStream; the rule scripts run the same code
// on internal/memlog through it.
type catchUpLog interface {
	Streams() []string
	StreamStatus(ctx context.Context, stream string) (logstore.StreamStatus, error)
	LastHeldSeq(ctx context.Context, stream string) (uint64, error)
	WatchErasures(ctx context.Context, ready chan<- struct{}, fn func(id string)) error
}

var _ catchUpLog = (*logstore.Store)(nil)

// streamInfos reads where each stream of l ends and when it was created.
func streamInfos(ctx context.Context, l catchUpLog) (map[string]streamInfo, error) {
	out := map[string]streamInfo{}
	for _, name := range l.Streams() {
		st, err := l.StreamStatus(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("projector: %w", err)
		}
		out[name] = streamInfo{last: st.LastSeq, created: st.Created}
	}
	return out, nil
}

// catchUp is where the projector is ready: each stream's last held
// message at start (lowered while catching up if it is deleted meanwhile,
// lower), folded and committed. target is used by the fold loop only;
// done is read by Ready too.
type catchUp struct {
	target map[string]uint64
	done   atomic.Bool
}

// from is where the fold starts in each stream of infos by mode (at its
// start when the views are rebuilt), and aims the catch-up at the last
// message each holds now: ready once it is folded (below the stream's
// last sequence when its last messages were erased; read here only, the
// rollback checks need the last sequence alone). A log in a leader
// election is asked again until ctx ends.
func (c *catchUp) from(ctx context.Context, l catchUpLog, infos map[string]streamInfo, mode StartMode) ([]store.StreamPos, error) {
	var pos []store.StreamPos
	for name, info := range infos {
		p := mode.From.Stream(name)
		if mode.Rebuild {
			p = store.StreamPos{Name: name}
		}
		p.Created = info.created
		pos = append(pos, p)
		held, err := logstore.WhileUnreachable(ctx, 5*time.Second, nil, func(ctx context.Context) (uint64, error) { return l.LastHeldSeq(ctx, name) })
		if err != nil {
			return nil, fmt.Errorf("projector: %w", err)
		}
		c.target[name] = held
	}
	return pos, nil
}

// reaches reports whether pos (the folder's, or a checkpoint's) reaches
// every stream's target.
func (c *catchUp) reaches(pos map[string]*store.StreamPos) bool {
	for name, t := range c.target {
		if p := pos[name]; p == nil || p.Seq < t {
			return false
		}
	}
	return true
}

// update marks the projector caught up once the committed views
// (checkpoint cp) reach the target, and tells the folder so.
func (c *catchUp) update(f *folder, log *slog.Logger, cp store.Checkpoint) {
	if c.done.Load() {
		return
	}
	pos := map[string]*store.StreamPos{}
	for i := range cp.Streams {
		pos[cp.Streams[i].Name] = &cp.Streams[i]
	}
	if !c.reaches(pos) {
		return
	}
	f.catchingUp = false
	c.done.Store(true)
	log.Info("projector: caught up", "checkpoint", cp.Streams)
}

// targetRecheck is how often a projector catching up with nothing to fold
// reads again the last message each stream holds.
const targetRecheck = 2 * time.Second

// recheck is a timer's channel while the projector catches up, else nil
// (a select waits on it for ever).
func (c *catchUp) recheck() <-chan time.Time {
	if c.done.Load() {
		return nil
	}
	return time.After(targetRecheck)
}

// lower lowers the target of a stream whose last held message at start
// was deleted since (an erase in flight while the projector caught up:
// the stream's seqs after it are deleted messages no consumer delivers)
// to the last message it holds now, so that readiness does not wait for
// the next append. Run by the fold loop when it has nothing to fold.
func (c *catchUp) lower(ctx context.Context, ls catchUpLog, f *folder, log *slog.Logger) {
	for name, t := range c.target {
		if p := f.pos[name]; p != nil && p.Seq >= t {
			continue
		}
		held, err := ls.LastHeldSeq(ctx, name)
		if err != nil {
			log.Warn("projector: reading the last message a stream holds", "stream", name, "err", err)
			return
		}
		c.target[name] = min(t, held)
	}
	c.update(f, log, f.checkpoint())
}
