package projector

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
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

// watchErasures follows SESSION_ERASED until ctx ends: each id is refused
// by reads from now on and queued for the fold loop. A broken watch (or a
// bucket not provisioned yet) is retried.
func (s *Service) watchErasures(ctx context.Context) {
	for {
		err := s.ls.WatchErasures(ctx, nil, func(id string) {
			s.er.add(id)
			select {
			case s.er.ch <- id:
			case <-ctx.Done():
			}
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("projector: erasure watch; retrying", "err", err)
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
	if _, ok, err := s.db.Get(store.SnapshotKey(id)); err != nil {
		return err
	} else if ok {
		k := store.SnapshotKey(id)
		b.DeleteInternal(k)
		ranges = append(ranges, [2][]byte{k, append(bytes.Clone(k), 0)})
	}
	// Whole prefixes: the event index and the links to its children.
	for _, p := range [][]byte{store.EventPrefix(id), store.ChildPrefix(id)} {
		n, err := s.scan(p, func(k []byte) bool { return true }, b)
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
	if t := tenantOf(id); t != "" {
		prefixes = append(prefixes, store.TenantActivityPrefix(t), store.TenantStatusesPrefix(t))
	}
	for _, p := range prefixes {
		if _, err := s.scan(p, func(k []byte) bool { return indexOf(p, k) == id }, b); err != nil {
			return err
		}
	}
	// The search index, keyed term first: every term's keys of the id
	// (an erase is rare; the whole index is read).
	if _, err := s.scan(store.SearchPrefix(), func(k []byte) bool { return store.SearchKeySession(k) == id }, b); err != nil {
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
func (s *Service) scan(p []byte, match func(k []byte) bool, b *store.Batch) (int, error) {
	it, err := s.db.Iter(p)
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

// streamed are the reads of a session whose answers are streamed (a page
// at a time, for as long as the client takes).
var streamed = map[string]bool{"watch": true, "acp": true, "events": true, "context": true, "export": true}

// refuseErased answers the reads of an erased session with 404 and the
// code erased; everything else goes to next. GET /v1/audit is served here.
func (s *Service) refuseErased(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/audit" && r.Method == http.MethodGet {
			s.handleAudit(w, r)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/sessions/")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		id, sub, _ := strings.Cut(rest, "/")
		erased := func() {
			msg := "session " + id + " was erased"
			// An erasure under way is named as such (its job finishes by
			// itself), with its progress.
			if rec, _, err := s.ls.ErasureOf(r.Context(), id); err == nil && rec != nil && !rec.Done {
				msg = fmt.Sprintf("session %s is being erased (%s, %d of %d events deleted; it finishes by itself)",
					id, rec.Phase, rec.Deleted, max(rec.Total, rec.Deleted))
			}
			apiError(w, http.StatusNotFound, schema.CodeErased, msg)
		}
		if s.er.has(id) {
			erased()
			return
		}
		if !streamed[sub] {
			next.ServeHTTP(w, r)
			return
		}
		// A watch, or a streamed answer, open when its session is erased
		// ends.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		if !s.er.watching(id, &cancel) {
			erased()
			return
		}
		defer s.er.unwatch(id, &cancel)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// AuditPage is the body of GET /v1/audit: the audit records of erased
// sessions, oldest first; next is the after= of the following page.
type AuditPage struct {
	Records []api.AuditRecord `json:"records"`
	Next    uint64            `json:"next"`
}

func (s *Service) handleAudit(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	limit := DefaultListLimit
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 && v <= MaxListLimit {
		limit = v
	}
	recs, next, err := s.ls.AuditRecords(r.Context(), after, limit)
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, schema.CodeNotCommitted, err.Error())
		return
	}
	// An erased session's summary is gone: a token naming agents sees no
	// record (sees).
	if httpauth.TenantOf(r.Context()) != "" {
		err := s.view(func(rd reader) error {
			keep := visible(r, rd)
			recs = slices.DeleteFunc(recs, func(a api.AuditRecord) bool { return !keep(a.SessionID) })
			n := namesOf(r)
			for i := range recs {
				recs[i].SessionID = n.wire(recs[i].SessionID)
			}
			return nil
		})
		if err != nil {
			s.internal(w, err)
			return
		}
	}
	if recs == nil {
		recs = []api.AuditRecord{}
	}
	writeJSON(w, AuditPage{Records: recs, Next: next})
}
