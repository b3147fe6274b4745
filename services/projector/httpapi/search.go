package httpapi

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// The query half of search: the index is the fold's (package projector,
// search.go), walked through store.Snapshot.Search; a query's words are
// cut as the fold cuts the text it indexes (Views.Terms).

const (
	// maxQueryTerms bounds the words of a query; every one must match.
	maxQueryTerms      = 8
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
)

// defaultSearchScanBudget bounds the sessions one search request
// examines (Config.SearchScanBudget); beyond it the page ends early with
// a cursor to continue. A variable only so that tests need not fold
// 20,000 sessions to see a page end at the budget (SetSearchScanBudget).
var defaultSearchScanBudget = 20000

// SearchHit is one session a search found.
type SearchHit struct {
	Summary store.Summary `json:"session"`
	// Seq is the event where the first query word is found; Field says
	// what it is (metadata or user or assistant), Snippet shows the text
	// around the match.
	Seq     uint64 `json:"seq"`
	Field   string `json:"field"`
	Snippet string `json:"snippet"`
}

// SearchResult is GET /v1/search.
type SearchResult struct {
	Query   string      `json:"query"`
	Terms   []string    `json:"terms"`
	Results []SearchHit `json:"results"`
	// Next is the after= of the following page, empty at the end.
	Next string `json:"next,omitempty"`
	// StoppedAt is the last session examined when the page ended
	// because the request examined Config.SearchScanBudget sessions before it
	// found limit (Next is the same: the next page goes on after it).
	StoppedAt string `json:"stoppedAt,omitempty"`
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := q.Get("q")
	ts := s.v.Terms(query)
	if len(ts) == 0 || len(ts) > maxQueryTerms || len(query) > 1024 {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "q must hold 1 to 8 words of 2 to 48 letters or digits")
		return
	}
	limit, ok := parseLimit(w, r, DefaultSearchLimit, MaxSearchLimit)
	if !ok {
		return
	}
	after := q.Get("after")
	n := namesOf(r)
	if after != "" {
		after = n.stored(after)
	}
	if after != "" && !schema.ValidSessionID(after) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "after must be a session id from next")
		return
	}
	out := SearchResult{Query: query, Terms: ts, Results: []SearchHit{}}
	err := s.view(func(rd reader) error {
		hits, next, stopped, err := rd.search(ts, after, limit, s.cfg.SearchScanBudget, httpauth.TenantOf(r.Context()), s.listed(r, rd))
		if err != nil {
			return err
		}
		out.Next = n.wire(next)
		if stopped {
			out.StoppedAt = out.Next
		}
		for _, h := range hits {
			sum, err := rd.summary(h.id)
			if err != nil {
				return err
			}
			if sum != nil {
				out.Results = append(out.Results, SearchHit{Summary: *sum, Seq: h.seq})
			}
		}
		return nil
	})
	if err != nil {
		s.internal(w, err)
		return
	}
	for i := range out.Results {
		h := &out.Results[i]
		s.snippet(r, h, ts[0])
		n.summary(&h.Summary)
		if h.Field == "session" {
			h.Snippet = n.text(h.Snippet)
		}
	}
	writeJSON(w, out)
}

// searchHit is a session holding every word of a query; seq is the first
// event holding the first word.
type searchHit struct {
	id  string
	seq uint64
}

// search finds up to limit sessions (in session id order, after the
// session after) holding every one of terms. The first term's keys drive:
// one seek per session holding it, and one per other term to check that
// session. next is the cursor of the following page ("" at the end). A
// request examines budget sessions, and past them its page ends
// (stopped) at the next session it examines that keep leaves in: next is
// that session. keep, when set, leaves out the sessions it refuses
// (another agent's): a page never ends at one of them, so no cursor names
// a session the token does not see, and a token of agents examines past
// the budget the sessions it does not see up to its next one (as its
// list reads them). With a tenant ("": all) it walks that tenant's
// sessions alone: the keys of a tenant other than the default are the run
// of its prefix _T<tenant>_, the default tenant's all the others but those
// beginning with _T, skipped at one seek.
func (rd reader) search(ts []string, after string, limit, budget int, tenant string, keep func(id string) bool) (hits []searchHit, next string, stopped bool, err error) {
	// within: the tenant's ids begin with it; the default tenant skips
	// the ids beginning with _T.
	var within, skip string
	switch {
	case tenant == "":
	case tenant != api.DefaultTenant:
		within = api.TenantIDPrefix + tenant + "_"
	default:
		skip = api.TenantIDPrefix
	}
	scanned, stop := 0, "" // the sessions examined; where the budget ended the page
	err = rd.snap.Search(ts, within, skip, after, func(s store.SearchSession) bool {
		// More to look at: the next page starts after the last hit, or
		// after the session the budget stopped at.
		if len(hits) == limit {
			next = hits[len(hits)-1].id
			return false
		}
		if stop != "" {
			next, stopped = stop, true
			return false
		}
		scanned++
		seen := keep == nil || keep(s.ID)
		if seen && s.HoldsAll() {
			hits = append(hits, searchHit{s.ID, s.Seq})
		}
		if seen && scanned >= budget {
			stop = s.ID
		}
		return true
	})
	if err != nil {
		return nil, "", false, err
	}
	return hits, next, stopped, nil
}

// snippet fills what a hit matched: the metadata field holding the term,
// or the message text around it, read from the log.
func (s *Server) snippet(r *http.Request, h *SearchHit, term string) {
	sum := &h.Summary
	meta := []struct{ field, text string }{{"session", sum.SessionID}, {"title", sum.Title}, {"agent", sum.Agent}, {"workspace", sum.Workspace}}
	for _, k := range slices.Sorted(maps.Keys(sum.Labels)) {
		meta = append(meta, struct{ field, text string }{"label " + k, k + "=" + sum.Labels[k]})
	}
	if h.Seq <= 1 {
		for _, m := range meta {
			if slices.Contains(s.v.Terms(m.text), term) || strings.EqualFold(m.text, term) {
				h.Field, h.Snippet = m.field, clipAround(m.text, term)
				return
			}
		}
		h.Field = "session"
		return
	}
	var ss uint64
	if err := s.view(func(rd reader) (err error) {
		ss, err = rd.snap.StreamSeq(sum.SessionID, h.Seq)
		return err
	}); err != nil || ss == 0 {
		return
	}
	loc, err := s.ls.Locate(sum.SessionID)
	if err != nil {
		return
	}
	m, err := s.ls.MsgAt(r.Context(), loc.Stream, ss)
	if err != nil || m == nil {
		return
	}
	ev, err := schema.Decode(m.Data)
	if err != nil {
		return
	}
	h.Field = strings.TrimPrefix(ev.Type, "message/")
	h.Snippet = clipAround(s.v.EventText(sum.SessionID, &ev), term)
}

// clipAround returns up to 200 bytes of s around the first occurrence of
// term (case-insensitive), on rune boundaries.
func clipAround(s, term string) string {
	const width = 200
	if len(s) <= width {
		return s
	}
	i := strings.Index(strings.ToLower(s), term)
	if i < 0 {
		i = 0
	}
	from := max(0, i-width/3)
	to := min(len(s), from+width)
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	out := s[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}
