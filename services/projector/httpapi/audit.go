package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// streamed are the reads of a session whose answers are streamed (a page
// at a time, for as long as the client takes).
var streamed = map[string]bool{"watch": true, "acp": true, "events": true, "context": true, "export": true}

// refuseErased answers the reads of an erased session with 404 and the
// code erased; everything else goes to next. GET /v1/audit is served here.
func (s *Server) refuseErased(next http.Handler) http.Handler {
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
		if s.v.Erased(id) {
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
		if !s.v.WatchErased(id, &cancel) {
			erased()
			return
		}
		defer s.v.UnwatchErased(id, &cancel)
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
// could see (Sees) when they were erased, by the owner and grants the
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

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
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
	if err != nil && !errors.Is(err, ErrClosed) {
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
func (s *Server) indexAudit(ctx context.Context, tenant string, agents []string) (last uint64, err error) {
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
func (s *Server) indexTenantAudit(ctx context.Context, tenant string) error {
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
			t := api.TenantOf(a.SessionID)
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
		if err := s.v.SetInternals(kvs); err != nil {
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
func (s *Server) indexAgentsAudit(tenant string, agents []string) (last uint64, err error) {
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
				if api.TenantOf(a.SessionID) == tenant && see(a) {
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
		if err := s.v.SetInternals(append(kvs, [2][]byte{ck, v})); err != nil {
			return last, err
		}
	}
}

// lastAudit is the number of tenant's last indexed audit record (0: none).
func (s *Server) lastAudit(tenant string) (n uint64, err error) {
	err = s.view(func(rd reader) (err error) {
		n, err = rd.snap.LastAudit(tenant)
		return err
	})
	return n, err
}

// auditPage is the page of tenant's audit records numbered after after,
// at most limit; next is the number of the last one (after when none).
func (rd reader) auditPage(tenant string, after uint64, limit int) (recs []api.AuditRecord, next uint64, err error) {
	next = after
	err = rd.snap.TenantAudit(tenant, after, func(n uint64, a *api.AuditRecord) bool {
		if api.TenantOf(a.SessionID) == tenant {
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
// agents sees (Sees): by the owner and grants the record names, or for a
// record that names no owner (written before records named them) by
// those of the session's summary, or once its views are removed those
// kept for it (ErasedOwnerKey).
func auditVisible(rd reader, tenant string, agents []string) func(a *api.AuditRecord) bool {
	return func(a *api.AuditRecord) bool {
		id := a.SessionID
		if a.Owner != nil {
			return Sees(tenant, agents, id, &store.Summary{Owner: a.Owner, Grants: a.Grants})
		}
		sum, err := rd.summary(id)
		if err == nil && sum == nil {
			var o *store.ErasedOwner
			if o, err = rd.snap.ErasedOwner(id); o != nil {
				sum = &store.Summary{Owner: o.Owner, Grants: o.Grants}
			}
		}
		return err == nil && Sees(tenant, agents, id, sum)
	}
}
