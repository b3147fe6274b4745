package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// tenantAnswer is GET path with token: status, body and the headers as
// text. A watch is read until it has sent durable events (then cut).
func tenantAnswer(t *testing.T, r *projectortest.Running, token, path string, durable int) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.Srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var hdr strings.Builder
	resp.Header.Write(&hdr)
	if !strings.Contains(path, "/watch") || resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), hdr.String()
	}
	var body strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; n < durable && sc.Scan(); {
		body.WriteString(sc.Text() + "\n")
		if sc.Text() == "event: durable" {
			n++
		}
		if n == durable {
			sc.Scan() // its data
			body.WriteString(sc.Text() + "\n")
		}
	}
	return resp.StatusCode, body.String(), hdr.String()
}

// pageIDs are the session ids of a page of /v1/sessions or /v1/search,
// and its next.
func pageIDs(body string) (ids []string, next string) {
	var l struct {
		Sessions []store.Summary     `json:"sessions"`
		Results  []httpapi.SearchHit `json:"results"`
		Next     string              `json:"next"`
	}
	json.Unmarshal([]byte(body), &l)
	for _, s := range l.Sessions {
		ids = append(ids, s.SessionID)
	}
	for _, h := range l.Results {
		ids = append(ids, h.Summary.SessionID)
	}
	return ids, l.Next
}

// TestTenantNames: a tenant's token names its sessions as its agents do
// (<id> for the session stored as _T<tenant>_<id>): on every path it
// reads, in paths, cursors and answers (lists and their cursors, details
// with parent and children, trees, search and its cursor, the audit, the
// watch, ACP replay, exports of every format and their file names, error
// messages), no answer holds a _T anywhere but in the stored events
// (/events, the watch's durable events, the sessionlog export), which go
// out as stored, as sessions.api.read gives them. Another tenant's
// session of the same name is not the one it gets, and one typed as
// stored answers as a missing one. An export to codex names the thread
// by the tenant's id (an imported codex-<uuid> gives back its uuid).
func TestTenantNames(t *testing.T) {
	e, r := startTenants(t)
	const uuid = "01234567-89ab-4cde-8f01-23456789abcd"
	codex := "codex-" + uuid
	createTenantSessions(t, e, r, op, [][2]string{
		{"_Tacme_s1", `{"title":"zebra acme"}`},
		{"_Tacme_s2", `{"title":"zebra acme fork","parent":{"sessionId":"_Tacme_s1","seedLength":1,"depth":1}}`},
		{"_Tacme_" + codex, `{"title":"zebra acme codex"}`},
		{"_Tacme_gone", `{"title":"zebra gone"}`},
		{"_Tbeta_s1", `{"title":"zebra beta"}`},
		{"plain-1", `{"title":"zebra plain"}`},
	})
	eraseTenantSession(t, e, r, op, "_Tacme_gone")
	own := []string{codex, "s1", "s2"}

	// check answers GET path to acme's token with status code and no _T
	// outside the stored events; it returns the body. A watch is read
	// up to its durable event lastSeq.
	var lastSeq int
	check := func(path string, code int) string {
		t.Helper()
		got, body, hdr := tenantAnswer(t, r, acme, path, lastSeq)
		if got != code {
			t.Fatalf("GET %s: %d %s, want %d", path, got, body, code)
		}
		rest := []string{hdr}
		stored := func(ev json.RawMessage) {
			var env struct {
				SessionID string `json:"sessionId"`
			}
			json.Unmarshal(ev, &env)
			if !strings.HasPrefix(env.SessionID, "_Tacme_") {
				t.Errorf("GET %s: an event of session %q, want its stored id", path, env.SessionID)
			}
		}
		switch {
		case strings.HasSuffix(path, "/events"):
			var m map[string]json.RawMessage
			json.Unmarshal([]byte(body), &m)
			var evs []json.RawMessage
			json.Unmarshal(m["events"], &evs)
			for _, ev := range evs {
				stored(ev)
			}
			delete(m, "events")
			b, _ := json.Marshal(m)
			rest = append(rest, string(b))
		case strings.HasSuffix(path, "/watch"):
			for l := range strings.SplitSeq(body, "\n") {
				d, ok := strings.CutPrefix(l, "data: ")
				if !ok {
					rest = append(rest, l)
					continue
				}
				var w map[string]json.RawMessage
				json.Unmarshal([]byte(d), &w)
				stored(w["event"])
				delete(w, "event")
				b, _ := json.Marshal(w)
				rest = append(rest, string(b))
			}
		case strings.HasSuffix(path, "/acp"):
			// Each update's _meta.sessionlog.data is its event's data as
			// stored.
			for l := range strings.SplitSeq(strings.TrimSpace(body), "\n") {
				var n struct {
					Params struct {
						Update struct {
							Meta struct {
								S map[string]json.RawMessage `json:"sessionlog"`
							} `json:"_meta"`
						} `json:"update"`
					} `json:"params"`
				}
				json.Unmarshal([]byte(l), &n)
				if d := n.Params.Update.Meta.S["data"]; d != nil {
					l = strings.Replace(l, string(d), "{}", 1)
				}
				rest = append(rest, l)
			}
		case strings.HasSuffix(path, "/export"):
			for l := range strings.SplitSeq(strings.TrimSpace(body), "\n") {
				stored(json.RawMessage(l))
			}
		default:
			rest = append(rest, body)
		}
		for _, s := range rest {
			if strings.Contains(s, "_T") {
				t.Errorf("GET %s: %s names a stored id", path, s)
			}
		}
		return body
	}
	ids := func(body string) []string {
		out, next := pageIDs(body)
		return append(out, "next="+next)
	}

	// Lists and search, whole and a session a page, by their cursors.
	for _, p := range []string{"/v1/sessions?", "/v1/sessions?status=active&", "/v1/search?q=zebra&"} {
		got := ids(check(p+"limit=10", 200))
		slices.Sort(got[:len(got)-1])
		if want := append(slices.Clone(own), "next="); !slices.Equal(got, want) {
			t.Errorf("GET %s: %v, want %v", p, got, want)
		}
		var paged []string
		for after, n := "", 0; n <= len(own); n++ {
			got := ids(check(p+"limit=1&after="+after, 200))
			paged = append(paged, got[:len(got)-1]...)
			if after = strings.TrimPrefix(got[len(got)-1], "next="); after == "" {
				break
			}
		}
		slices.Sort(paged)
		if !slices.Equal(paged, own) {
			t.Errorf("GET %s by pages: %v, want %v", p, paged, own)
		}
	}
	// A bare session id is a cursor of the list too: the tenant's own.
	check("/v1/sessions?after=s2", 200)
	check("/v1/sessions?after=_Tbeta_s1", 400)
	check("/v1/search?q=zebra&after=s1", 200)

	// Every read of every session.
	for _, id := range own {
		var d httpapi.Detail
		json.Unmarshal([]byte(check("/v1/sessions/"+id, 200)), &d)
		lastSeq = int(d.LastSeq)
		for _, sub := range []string{"", "/events", "/context", "/tree", "/watch", "/acp", "/export",
			"/export?format=claude-code", "/export?format=codex", "/export?format=pi"} {
			check("/v1/sessions/"+id+sub, 200)
		}
	}
	var d httpapi.Detail
	json.Unmarshal([]byte(check("/v1/sessions/s1", 200)), &d)
	if d.SessionID != "s1" || d.Title != "zebra acme" || !slices.Equal(d.Children, []string{"s2"}) {
		t.Errorf("s1: %s %q children %v", d.SessionID, d.Title, d.Children)
	}
	json.Unmarshal([]byte(check("/v1/sessions/s2", 200)), &d)
	if d.Parent == nil || d.Parent.SessionID != "s1" {
		t.Errorf("s2's parent: %+v", d.Parent)
	}
	var tr httpapi.Tree
	json.Unmarshal([]byte(check("/v1/sessions/s2/tree", 200)), &tr)
	if tr.SessionID != "s2" || len(tr.Ancestors) != 1 || tr.Ancestors[0].SessionID != "s1" || tr.Self.Parent != "s1" {
		t.Errorf("s2's tree: %+v", tr)
	}
	if x := check("/v1/sessions/"+codex+"/export?format=codex", 200); !strings.Contains(x, `"id":"`+uuid+`"`) {
		t.Errorf("codex export of %s: %.300s", codex, x)
	}
	if a := check("/v1/sessions/s1/acp", 200); !strings.Contains(a, `"sessionId":"s1"`) {
		t.Errorf("ACP replay: %.300s", a)
	}
	lastSeq = 3 // s1's
	if h := check("/v1/sessions/s1/watch", 200); !strings.Contains(h, ": watching s1 after 0") {
		t.Errorf("watch: %.300s", h)
	}

	// The audit and the erased, missing and others' sessions.
	var audit httpapi.AuditPage
	json.Unmarshal([]byte(check("/v1/audit", 200)), &audit)
	if len(audit.Records) != 1 || audit.Records[0].SessionID != "gone" {
		t.Errorf("audit: %+v", audit.Records)
	}
	if b := check("/v1/sessions/gone/events", 404); !strings.Contains(b, `"erased"`) || !strings.Contains(b, "session gone ") {
		t.Errorf("gone: %s", b)
	}
	// Typed as stored, another's session (or its own) is a missing one
	// of the name typed.
	missing := check("/v1/sessions/missing", 404)
	for _, id := range []string{"_Tbeta_s1", "_Tacme_s1", "plain-1"} {
		if _, b := tenantGet(t, r, acme, "/v1/sessions/"+id); b != strings.ReplaceAll(missing, "missing", id) {
			t.Errorf("GET %s: %s, want what a missing session answers: %s", id, b, missing)
		}
	}
	// The operator names them as stored.
	if _, b := tenantGet(t, r, op, "/v1/sessions/_Tacme_s2"); !strings.Contains(b, `"sessionId":"_Tacme_s2"`) || !strings.Contains(b, `"sessionId":"_Tacme_s1"`) {
		t.Errorf("the operator's s2: %s", b)
	}
}

// TestTenantWatchEndsOnErase: a session a tenant's token (or its agents')
// is watching, or reading a streamed answer of, becomes invisible to it
// only when erased (owners do not change, grants only grow): its open
// watches end then, for every token, and a watch asked again answers as
// the session now is to the token (erased to the tenant's token, not
// found to its agents').
func TestTenantWatchEndsOnErase(t *testing.T) {
	const alice = "alice-token-0123456789"
	e, r := startTokens(t, map[string]string{acme: "acme", alice: "acme:alice"})
	createTenantSessions(t, e, r, op, [][2]string{{"_Tacme_s1", `{"title":"zebra","owner":{"tenant":"acme","agent":"alice"}}`}})
	type watch struct {
		token, path string
		ended       chan struct{}
	}
	watches := []*watch{{op, "/v1/sessions/_Tacme_s1/watch", nil}, {acme, "/v1/sessions/s1/watch", nil}, {alice, "/v1/sessions/s1/watch", nil}}
	for _, w := range watches {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.Srv.URL+w.path, nil)
		req.Header.Set("Authorization", "Bearer "+w.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("watch %s: %v %v", w.path, resp, err)
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "retry:") {
			t.Fatalf("watch %s: %q", w.path, sc.Text())
		}
		w.ended = make(chan struct{})
		go func() {
			defer close(w.ended)
			defer resp.Body.Close()
			for sc.Scan() {
			}
		}()
	}
	e.Erase("_Tacme_s1")
	for _, w := range watches {
		select {
		case <-w.ended:
		case <-time.After(20 * time.Second):
			t.Fatalf("the watch %s of the token %s is still open after the erase", w.path, w.token)
		}
	}
	for _, c := range []struct{ token, path, code string }{{op, "/v1/sessions/_Tacme_s1/watch", `"erased"`}, {acme, "/v1/sessions/s1/watch", `"erased"`}, {alice, "/v1/sessions/s1/watch", `"not_found"`}} {
		// (A token of agents sees the erased session until its views go.)
		waitFor(t, func() bool {
			code, body := tenantGet(t, r, c.token, c.path)
			return code == 404 && strings.Contains(body, c.code)
		})
	}
}
