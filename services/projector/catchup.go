package projector

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// catchUp is where the projector is ready: each stream's last held
// message at start (lowered while catching up if it is deleted meanwhile,
// lower), folded and committed. target is used by the fold loop only;
// done is read by Ready too.
type catchUp struct {
	target map[string]uint64
	done   atomic.Bool
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
func (c *catchUp) lower(ctx context.Context, ls *logstore.Store, f *folder, log *slog.Logger) {
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
