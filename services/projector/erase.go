package projector

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
			ns, tenant := store.TimeKey(sum.LastActivity), tenantOf(id)
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

// The operator's audit pages are the audit stream's (after and next are
// its sequences). A tenant's token pages through its tenant's records
// alone: the projector indexes the stream's records by tenant
// (TenantAuditKey), each tenant's numbered 1, 2, ... in the stream's
// order (after and next are those numbers, which say nothing of other
// tenants' erasures), brought up to date with the stream before each such
// request (indexAudit), so a page holds limit records whenever that many
// follow. A token of agents sees, of them, the records of the sessions it
// could see (sees) when they were erased, by the owner and grants the
// record names (the eraser's, from the session's events). A record
// written before records named them has none: for it the owner and grants
// are the session's summary's, kept when its views are removed
// (ErasedOwnerKey); a session erased before the projector kept owners, or
// before a rebuild of its views (its events are gone), has none, and its
// record is the tenant token's alone.
//
// A token of agents has numbers of its own: the records its agents see
// are numbered 1, 2, ... again (AgentsAuditKey, indexed from the
// tenant's before each of its requests, indexAgentsAudit), and its after
// and next are those numbers. Numbered by the tenant's, the gaps between
// the numbers it is given would count the erasures of the sessions of
// the tenant's other agents, and when they were made. Its cursors tell
// it nothing but how many records it has seen; one it was never given
// (not a number, or past its last record) is refused.

func (s *Service) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("after")
	after, perr := strconv.ParseUint(q, 10, 64)
	limit := DefaultListLimit
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 && v <= MaxListLimit {
		limit = v
	}
	tenant, agents := httpauth.TenantOf(r.Context()), httpauth.AgentsOf(r.Context())
	if agents != nil && perr != nil && q != "" {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "after "+q+" is no audit cursor of this token")
		return
	}
	var recs []api.AuditRecord
	next := after
	last, err := s.indexAudit(r.Context(), tenant, agents)
	if err == nil && tenant == "" {
		recs, next, err = s.ls.AuditRecords(r.Context(), after, limit)
	}
	if err != nil && !errors.Is(err, errClosed) {
		apiError(w, http.StatusServiceUnavailable, schema.CodeNotCommitted, err.Error())
		return
	}
	if err == nil && agents != nil && after > last {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest,
			fmt.Sprintf("after %d is no audit cursor of this token: its records are numbered up to %d", after, last))
		return
	}
	if err == nil && tenant != "" {
		err = s.view(func(rd reader) error {
			var err error
			if agents == nil {
				recs, next, err = rd.auditPage(tenant, after, limit)
			} else {
				recs, next, err = rd.agentsAuditPage(tenant, agents, after, limit)
			}
			n := namesOf(r)
			for i := range recs {
				recs[i].SessionID = n.wire(recs[i].SessionID)
			}
			return err
		})
	}
	if err != nil {
		s.internal(w, err)
		return
	}
	if recs == nil {
		recs = []api.AuditRecord{}
	}
	writeJSON(w, AuditPage{Records: recs, Next: next})
}

// indexAudit indexes by tenant the audit records written since it last
// ran (for a tenant's request: tenant not ""), a batch of them at a time,
// each batch with the stream sequence it reached (AuditCursorKey), and
// for a token of agents (agents not nil) the tenant's records they see
// (indexAgentsAudit; last is the number of their last). The stream
// denies deletes and purges, so a store wiped for a rebuild numbers every
// tenant's records alike again. A record of an id that is no tenant's
// (tenantOf "") is the operator's alone.
func (s *Service) indexAudit(ctx context.Context, tenant string, agents []string) (last uint64, err error) {
	if tenant == "" {
		return 0, nil
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	if err := s.indexTenantAudit(ctx, tenant); err != nil {
		return 0, err
	}
	if agents == nil {
		return 0, nil
	}
	return s.indexAgentsAudit(tenant, agents)
}

// indexTenantAudit is indexAudit's part for every tenant (auditMu held).
func (s *Service) indexTenantAudit(ctx context.Context, tenant string) error {
	var cursor uint64
	err := s.view(func(rd reader) (err error) {
		cursor, err = rd.snap.AuditCursor()
		return err
	})
	if err != nil {
		return err
	}
	last := map[string]uint64{} // each tenant's last number
	for {
		recs, at, err := s.ls.AuditRecords(ctx, cursor, auditIndexBatch)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		kvs := make([][2][]byte, 0, len(recs)+1)
		for _, a := range recs {
			t := tenantOf(a.SessionID)
			if t == "" {
				continue
			}
			n, ok := last[t]
			if !ok {
				if n, err = s.lastAudit(t); err != nil {
					return err
				}
			}
			last[t] = n + 1
			v, _ := json.Marshal(a)
			kvs = append(kvs, [2][]byte{store.TenantAuditKey(t, n+1), v})
		}
		cursor = at
		kvs = append(kvs, [2][]byte{store.AuditCursorKey(), binary.BigEndian.AppendUint64(nil, cursor)})
		if err := s.setInternals(kvs); err != nil {
			return err
		}
	}
}

// auditIndexBatch is the most audit records indexAudit writes at once.
const auditIndexBatch = 256

// indexAgentsAudit numbers the tenant's audit records the agents see
// (auditVisible) 1, 2, ... (AgentsAuditKey), from the tenant's first one
// it has not judged (AgentsAuditCursorKey), a batch at a time, and
// returns the number of the agents' last (auditMu held). A record is
// judged once: by the owner and grants it names, or for one that names
// none by those the projector keeps for its session (auditVisible) when
// the agents first ask after it is indexed; both stay as they are until
// the store is wiped, when the agents' records are numbered again with
// the tenant's.
func (s *Service) indexAgentsAudit(tenant string, agents []string) (last uint64, err error) {
	ck := store.AgentsAuditCursorKey(tenant, agents)
	for {
		var n, judged uint64
		var kvs [][2][]byte
		err := s.view(func(rd reader) (err error) {
			if n, last, err = rd.snap.AgentsAuditCursor(tenant, agents); err != nil {
				return err
			}
			see := auditVisible(rd, tenant, agents)
			return rd.snap.TenantAudit(tenant, n, func(k uint64, a *api.AuditRecord) bool {
				n, judged = k, judged+1
				if tenantOf(a.SessionID) == tenant && see(a) {
					last++
					kvs = append(kvs, [2][]byte{store.AgentsAuditKey(tenant, agents, last), binary.BigEndian.AppendUint64(nil, n)})
				}
				return judged < auditIndexBatch
			})
		})
		if err != nil || judged == 0 {
			return last, err
		}
		v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n), last)
		if err := s.setInternals(append(kvs, [2][]byte{ck, v})); err != nil {
			return last, err
		}
	}
}

// lastAudit is the number of tenant's last indexed audit record (0: none).
func (s *Service) lastAudit(tenant string) (n uint64, err error) {
	err = s.view(func(rd reader) (err error) {
		n, err = rd.snap.LastAudit(tenant)
		return err
	})
	return n, err
}

// setInternals writes internal keys (store.DB.SetInternals) unless the
// store is closed.
func (s *Service) setInternals(kvs [][2][]byte) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed.Load() {
		return errClosed
	}
	return s.db.SetInternals(kvs)
}

// auditPage is the page of tenant's audit records numbered after after,
// at most limit; next is the number of the last one (after when none).
func (rd reader) auditPage(tenant string, after uint64, limit int) (recs []api.AuditRecord, next uint64, err error) {
	next = after
	err = rd.snap.TenantAudit(tenant, after, func(n uint64, a *api.AuditRecord) bool {
		if tenantOf(a.SessionID) == tenant {
			recs, next = append(recs, *a), n
		}
		return len(recs) < limit
	})
	if err != nil {
		return nil, after, err
	}
	return recs, next, nil
}

// agentsAuditPage is the page of the audit records of tenant the agents
// see numbered (by indexAgentsAudit) after after, at most limit; next is
// the number of the last one (after when none).
func (rd reader) agentsAuditPage(tenant string, agents []string, after uint64, limit int) (recs []api.AuditRecord, next uint64, err error) {
	next = after
	err = rd.snap.AgentsAudit(tenant, agents, after, func(m uint64, a *api.AuditRecord) bool {
		recs, next = append(recs, *a), m
		return len(recs) < limit
	})
	if err != nil {
		return nil, after, err
	}
	return recs, next, nil
}

// auditVisible is the test of the audit records of tenant a token of
// agents sees (sees): by the owner and grants the record names, or for a
// record that names no owner (written before records named them) by
// those of the session's summary, or once its views are removed those
// kept for it (ErasedOwnerKey).
func auditVisible(rd reader, tenant string, agents []string) func(a *api.AuditRecord) bool {
	return func(a *api.AuditRecord) bool {
		id := a.SessionID
		if a.Owner != nil {
			return sees(tenant, agents, id, &store.Summary{Owner: a.Owner, Grants: a.Grants})
		}
		sum, err := rd.summary(id)
		if err == nil && sum == nil {
			var o *store.ErasedOwner
			if o, err = rd.snap.ErasedOwner(id); o != nil {
				sum = &store.Summary{Owner: o.Owner, Grants: o.Grants}
			}
		}
		return err == nil && sees(tenant, agents, id, sum)
	}
}
