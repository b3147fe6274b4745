package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Erasure (DESIGN.md section 14): the projector follows SESSION_ERASED.
// An erased id is refused by every read at once (erased), its events are
// no longer folded, and the fold loop removes its views, index entries,
// compaction summary, children links and fold snapshot from Pebble, then
// flushes and compacts the key ranges they held, so that no copy of them
// is left in an SSTable or a live WAL.

// erasures is the set of erased ids and the queue of those whose views
// the fold loop has yet to remove.
type erasures struct {
	mu  sync.RWMutex
	ids map[string]bool
	ch  chan string
	// watches ends the open watch streams of a session when it is erased.
	watches map[string]map[*context.CancelFunc]struct{}
}

func newErasures() *erasures {
	return &erasures{ids: map[string]bool{}, ch: make(chan string, 1024), watches: map[string]map[*context.CancelFunc]struct{}{}}
}

// add marks id erased and ends its open watches.
func (e *erasures) add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids[id] = true
	for c := range e.watches[id] {
		(*c)()
	}
	delete(e.watches, id)
}

// watching registers an open watch of id; it returns false (and registers
// nothing) if id is erased already.
func (e *erasures) watching(id string, cancel *context.CancelFunc) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids[id] {
		return false
	}
	if e.watches[id] == nil {
		e.watches[id] = map[*context.CancelFunc]struct{}{}
	}
	e.watches[id][cancel] = struct{}{}
	return true
}

func (e *erasures) unwatch(id string, cancel *context.CancelFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.watches[id], cancel)
	if len(e.watches[id]) == 0 {
		delete(e.watches, id)
	}
}

func (e *erasures) has(id string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.ids[id]
}

// follow follows SESSION_ERASED until ctx ends: each id is refused
// by reads from now on and queued for the fold loop. A broken watch (or a
// bucket not provisioned yet) is retried.
func (e *erasures) follow(ctx context.Context, ls catchUpLog, log *slog.Logger) {
	for {
		err := ls.WatchErasures(ctx, nil, func(id string) {
			e.add(id)
			select {
			case e.ch <- id:
			case <-ctx.Done():
			}
		})
		if ctx.Err() != nil {
			return
		}
		log.Warn("projector: erasure watch; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(erasureWatchRetry):
		}
	}
}

// erasureWatchRetry is the wait before a broken erasure watch is made again.
const erasureWatchRetry = 2 * time.Second

// eraseViews removes every key of a session from the store (called by
// the fold loop with no batch open) and scrubs the ranges they held.
func (s *Service) eraseViews(id string) error {
	s.f.forget(id)
	b := s.db.NewBatch()
	var ranges [][2][]byte
	del := func(k, v []byte) {
		b.Delete(k, v)
		ranges = append(ranges, [2][]byte{k, append(bytes.Clone(k), 0)})
	}
	for _, k := range [][]byte{store.SummaryKey(id), store.CompactionKey(id)} {
		v, ok, err := s.db.Get(k)
		if err != nil {
			return err
		}
		if ok {
			del(bytes.Clone(k), v)
		}
	}
	if v, ok, err := s.db.Get(store.SummaryKey(id)); err != nil {
		return err
	} else if ok {
		var sum store.Summary
		if store.DecodeSummary(v, &sum) == nil && sum.Owner != nil {
			// Its owner stays for its audit record if the record names
			// none (one written before records named owners,
			// auditVisible): the summary goes, and its events, so nothing
			// else will tell.
			o, _ := json.Marshal(store.ErasedOwner{Owner: sum.Owner, Grants: sum.Grants})
			b.SetInternal(store.ErasedOwnerKey(id), o)
			// Its keys in the indexes of its agents: where the fold put
			// them, by the summary it wrote with them.
			ns, tenant := store.TimeKey(sum.LastActivity), api.TenantOf(id)
			for _, a := range readers(id, &sum) {
				for _, p := range [][]byte{store.AgentActivityPrefix(tenant, a), store.AgentStatusPrefix(tenant, a, sum.Status)} {
					k := store.IndexKey(p, ns, id)
					if v, ok, err := s.db.Get(k); err != nil {
						return err
					} else if ok {
						del(k, v)
					}
				}
			}
		}
	}
	if _, ok, err := s.db.Get(store.SnapshotKey(id)); err != nil {
		return err
	} else if ok {
		k := store.SnapshotKey(id)
		b.DeleteInternal(k)
		ranges = append(ranges, [2][]byte{k, append(bytes.Clone(k), 0)})
	}
	// Whole prefixes: the event index and the links to its children.
	for _, p := range [][]byte{store.EventPrefix(id), store.ChildPrefix(id)} {
		n, err := scan(s.db, p, func(k []byte) bool { return true }, b)
		if err != nil {
			return err
		}
		if n > 0 {
			ranges = append(ranges, [2][]byte{p, store.PrefixEnd(p)})
		}
	}
	// Index entries that end with the id: activity, status (of all
	// sessions and of its tenant's), and the link from its parent.
	prefixes := [][]byte{store.ActivityPrefix(), []byte("vt"), []byte("vk")}
	if t := api.TenantOf(id); t != "" {
		prefixes = append(prefixes, store.TenantActivityPrefix(t), store.TenantStatusesPrefix(t))
	}
	for _, p := range prefixes {
		if _, err := scan(s.db, p, func(k []byte) bool { return indexOf(p, k) == id }, b); err != nil {
			return err
		}
	}
	// The search index, keyed term first: every term's keys of the id
	// (an erase is rare; the whole index is read).
	if _, err := scan(s.db, store.SearchPrefix(), func(k []byte) bool { return store.SearchKeySession(k) == id }, b); err != nil {
		return err
	}
	if b.Ops() == 0 {
		return nil
	}
	for _, k := range b.Keys() {
		ranges = append(ranges, [2][]byte{k, append(bytes.Clone(k), 0)})
	}
	if err := b.Commit(s.f.checkpoint()); err != nil {
		return err
	}
	// Readers wait: their snapshots would keep the old values, and the
	// store is reopened.
	s.closeMu.Lock()
	err := s.db.Scrub(ranges)
	s.closeMu.Unlock()
	if err != nil {
		return err
	}
	s.log.Info("projector: erased views", "session", id)
	return nil
}

// scan deletes (in b) the view keys under prefix p that match.
func scan(db *store.DB, p []byte, match func(k []byte) bool, b *store.Batch) (int, error) {
	it, err := db.Iter(p)
	if err != nil {
		return 0, err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if match(it.Key()) {
			b.Delete(bytes.Clone(it.Key()), bytes.Clone(it.Value()))
			n++
		}
	}
	return n, it.Close()
}

// indexOf is the session id an index key names: after the 8-byte time of
// an activity or status key, after the separator of a child link.
func indexOf(prefix, k []byte) string {
	switch {
	case string(prefix) == "vt" || bytes.HasPrefix(prefix, []byte("vu")):
		// <status>\x00<time><id> after the prefix.
		i := bytes.IndexByte(k[len(prefix):], 0)
		if i < 0 || len(k) < len(prefix)+i+1+8 {
			return ""
		}
		return string(k[len(prefix)+i+1+8:])
	case string(prefix) == "vk":
		i := bytes.IndexByte(k[len(prefix):], 0)
		if i < 0 {
			return ""
		}
		return string(k[len(prefix)+i+1:])
	default:
		return store.IndexSession(prefix, k)
	}
}
