package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// script publishes hand-written events of one session straight to the
// stream, numbering them.
type script struct {
	t   *testing.T
	e   *projectortest.Env
	id  string
	seq uint64
	evs []schema.Envelope
	// ls: the store it publishes with (nil: the env's).
	ls *logstore.Store
}

func newScript(t *testing.T, e *projectortest.Env, id string) *script {
	return &script{t: t, e: e, id: id}
}

func (s *script) add(typ, data string, mod ...func(*schema.Envelope)) schema.Envelope {
	s.t.Helper()
	s.seq++
	_, name := api.WireOf(s.id) // as the session's agents name it
	ev := schema.Envelope{
		SchemaVersion: schema.Version, SessionID: s.id, Seq: s.seq, EventID: fmt.Sprintf("%s-%d", name, s.seq),
		Time: projectortest.T0.Add(time.Duration(s.seq) * time.Millisecond), Type: typ, Data: json.RawMessage(data),
	}
	for _, m := range mod {
		m(&ev)
	}
	s.publish(ev)
	return ev
}

func (s *script) publish(ev schema.Envelope) {
	s.t.Helper()
	ls := s.ls
	if ls == nil {
		ls = s.e.LS
	}
	if _, err := gen.Publish(s.e.Ctx, ls, ev); err != nil {
		s.t.Fatalf("publish %s %s: %v", ev.Type, ev.Data, err)
	}
	s.evs = append(s.evs, ev)
}

func inTurn(turn string) func(*schema.Envelope) {
	return func(ev *schema.Envelope) { ev.TurnID = turn }
}

// synthetic marks what a service writes (a fork's copy, a repair).
func synthetic(ev *schema.Envelope) { ev.Synthetic = true }

func toolCall(turn, call string) func(*schema.Envelope) {
	return func(ev *schema.Envelope) { ev.TurnID, ev.ToolCallID = turn, call }
}

// startWriter runs the writer (sessions.api.append, read) on the test's
// connection and waits until it answers.
func startWriter(t *testing.T, e *projectortest.Env) {
	t.Helper()
	w, err := assemble.NewWriter(assemble.DefaultWriter(), e.LS, assemble.Deps{Conn: e.NC})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.ReadRequest{SessionID: "probe"})
	runService(t, e, w.Run, api.SubjectRead, body)
}

// startForker runs the forker (sessions.api.fork) and waits until it answers.
func startForker(t *testing.T, e *projectortest.Env) {
	t.Helper()
	f, err := assemble.NewForker(assemble.DefaultForker(), e.LS, assemble.Deps{Conn: e.NC})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.ForkRequest{ParentID: "probe"})
	runService(t, e, f.Run, api.SubjectFork, body)
}

// runService runs a service until the test ends and waits until a probe
// request on subject finds it.
func runService(t *testing.T, e *projectortest.Env, run func(context.Context) error, subject string, probe []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		_, err := e.NC.Request(subject, probe, time.Second)
		if errors.Is(err, nats.ErrNoResponders) {
			return err
		}
		return nil
	})
}

// TestDashboardDeepLink: an address names a session and an event; pasted
// into a new page it opens that session with the event shown, and back
// and forward move between the views visited. At phone width the session
// fills the screen with a way back to the list.
func TestDashboardDeepLink(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("dl-a", projectortest.T0), 25)
	projectortest.PublishN(t, e, gen.NewSession("dl-b", projectortest.T0.Add(time.Minute)), 12)
	r.WaitSession(t, "dl-a", func(d httpapi.Detail) bool { return d.LastSeq == 25 })
	r.WaitSession(t, "dl-b", func(d httpapi.Detail) bool { return d.LastSeq == 12 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("open a pasted link",
		chromedp.Navigate(r.Srv.URL+"/?s=dl-a&e=14"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-a"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev.cur[data-seq="14"] .body pre`)),
	)
	if got := b.Text(`#d-title`); got != "load dl-a" {
		t.Fatalf("the link opened %q", got)
	}
	b.Shot("deep-link")
	b.Do("open another session from the list",
		chromedp.Click(chromedp.CSS(`#list [data-session-id="dl-b"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-b"]`)),
	)
	if got := b.EvalString(`location.search`); got != "?s=dl-b" {
		t.Fatalf("the address of the second session is %q", got)
	}
	b.Do("back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`#timeline .ev.cur[data-seq="14"]`)))
	if got := b.Text(`#d-title`); got != "load dl-a" {
		t.Fatalf("back shows %q", got)
	}
	b.Do("forward", chromedp.NavigateForward(), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-b"]`)))
	b.Do("a status filter is an address too",
		chromedp.Navigate(r.Srv.URL+"/?status=active"),
		chromedp.WaitVisible(chromedp.CSS(`#filters a.on[data-status="active"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview [data-count="active"]`)),
	)
	if got := b.EvalString(`typeof uPlot`); got != "function" {
		t.Errorf("the vendored chart library did not load: typeof uPlot is %q", got)
	}
	if got := b.Text(`#overview [data-count="active"] b`); got != "2" {
		t.Errorf("the fleet overview counts %s active sessions, want 2", got)
	}
	b.Shot("fleet")
	b.Do("phone width",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(r.Srv.URL+"/?s=dl-a"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-a"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#head .back`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#side`)),
	)
	if w := b.EvalInt(`document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at phone width the page is %d px wide", w)
	}
	b.Shot("phone")
	b.NoPageErrors()
}

// TestSearchIndex: GET /v1/search finds sessions by a word of their id,
// title, agent, labels, user and assistant messages, pages without
// repeating a session, says where the word is, and the index is a view:
// the live store equals a clean rebuild.
func TestSearchIndex(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	s := newScript(t, e, "srch-1")
	s.add(schema.TypeSessionCreated, `{"title":"Fix the Parser","agent":"claude-code","labels":{"gitBranch":"feature-lexer","host":"build7"}}`)
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t1"))
	s.add(schema.TypeMessageUser, `{"content":[{"type":"text","text":"Where did the Quokka escape to?"}]}`, inTurn("t1"))
	s.add(schema.TypeAttemptStarted, `{}`, func(ev *schema.Envelope) { ev.TurnID, ev.AttemptID = "t1", "a1" })
	s.add(schema.TypeMessageAssistant, `{"content":"Into the wombat burrow."}`, func(ev *schema.Envelope) { ev.TurnID, ev.AttemptID = "t1", "a1" })
	for i := range 5 {
		c := newScript(t, e, fmt.Sprintf("common-%d", i))
		c.add(schema.TypeSessionCreated, `{"title":"common chores"}`)
	}
	r.WaitSession(t, "srch-1", func(d httpapi.Detail) bool { return d.LastSeq == 5 })
	r.WaitSession(t, "common-4", func(d httpapi.Detail) bool { return d.LastSeq == 1 })

	search := func(q string, after string, limit int) httpapi.SearchResult {
		t.Helper()
		var out httpapi.SearchResult
		r.GetJSON(t, "/v1/search?q="+url.QueryEscape(q)+"&after="+after+"&limit="+fmt.Sprint(limit), &out)
		return out
	}
	for _, c := range []struct{ q, field string }{
		{"quokka", "user"}, {"WOMBAT", "assistant"}, {"parser", "title"}, {"claude", "agent"},
		{"lexer", "label gitBranch"}, {"build7", "label host"}, {"srch-1", "session"}, {"quokka escape", "user"},
	} {
		got := search(c.q, "", 20)
		if len(got.Results) != 1 || got.Results[0].Summary.SessionID != "srch-1" || got.Results[0].Field != c.field {
			t.Errorf("search %q: %+v, want srch-1 by its %s", c.q, got.Results, c.field)
			continue
		}
		if c.field == "user" && !strings.Contains(got.Results[0].Snippet, "Quokka") {
			t.Errorf("search %q: snippet %q", c.q, got.Results[0].Snippet)
		}
	}
	if got := search("quokka wombat", "", 20); len(got.Results) != 1 {
		t.Errorf("words of two messages of one session: %+v, want the session", got.Results)
	}
	if got := search("quokka chores", "", 20); len(got.Results) != 0 {
		t.Errorf("words of two sessions matched one: %+v", got.Results)
	}
	seen := map[string]bool{}
	for after, pages := "", 0; ; pages++ {
		page := search("common", after, 2)
		for _, h := range page.Results {
			if seen[h.Summary.SessionID] {
				t.Fatalf("%s on two pages", h.Summary.SessionID)
			}
			seen[h.Summary.SessionID] = true
		}
		if page.Next == "" || pages > 5 {
			break
		}
		after = page.Next
	}
	if len(seen) != 5 {
		t.Fatalf("paging found %d of 5 sessions: %v", len(seen), seen)
	}
	if code, body := r.Get(t, "/v1/search?q=%3C%3E"); code != http.StatusBadRequest {
		t.Errorf("a query without words: %d %s", code, body)
	}
	projectortest.CheckRebuild(t, e, r)
}

// TestDashboardSearch: a word of a session's user message, typed into the
// search box, lists the session with the word highlighted; the result
// opens the session at that message; the search is an address.
func TestDashboardSearch(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("other", projectortest.T0), 12)
	s := newScript(t, e, "find-me")
	s.add(schema.TypeSessionCreated, `{"title":"an ordinary title"}`)
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t1"))
	s.add(schema.TypeMessageUser, `{"content":"please feed the axolotl before noon"}`, inTurn("t1"))
	r.WaitSession(t, "find-me", func(d httpapi.Detail) bool { return d.LastSeq == 3 })
	r.WaitSession(t, "other", func(d httpapi.Detail) bool { return d.LastSeq == 12 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("search from the box",
		chromedp.Navigate(r.Srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#list [data-session-id="other"]`)),
		chromedp.SendKeys(chromedp.CSS(`#q`), "Axolotl\n"),
		chromedp.WaitVisible(chromedp.CSS(`#list [data-session-id="find-me"] mark`)),
	)
	if got := b.Text(`#list [data-session-id="find-me"] mark`); got != "axolotl" {
		t.Fatalf("highlighted %q", got)
	}
	if n := b.EvalInt(`document.querySelectorAll("#list .row").length`); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	if got := b.EvalString(`location.search`); got != "?q=Axolotl" {
		t.Fatalf("the search's address is %q", got)
	}
	b.Shot("results")
	b.Do("open the result",
		chromedp.Click(chromedp.CSS(`#list [data-session-id="find-me"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev.cur[data-seq="3"]`)),
	)
	b.Do("back to the results", chromedp.NavigateBack(), chromedp.WaitNotPresent(chromedp.CSS(`body[data-loaded]`)),
		chromedp.WaitVisible(chromedp.CSS(`#list [data-session-id="find-me"] mark`)))
	b.NoPageErrors()
}

// TestDashboardForkTree: a parent and the child forked from it link to
// each other with the cut point, and the child's tree shows its ancestor.
func TestDashboardForkTree(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	parent := gen.NewSession("tree-parent", projectortest.T0)
	evs := projectortest.PublishN(t, e, parent, 21) // created, two turns of 10
	// The child as the forker writes it: its own session/created naming
	// the parent and the cut, the parent's events 2..11 copied, then
	// fork/committed.
	c := newScript(t, e, "tree-child")
	c.add(schema.TypeSessionCreated, `{"title":"the child","parent":{"sessionId":"tree-parent","seedLength":11,"depth":1}}`, synthetic)
	for _, ev := range evs[1:11] {
		ev.SessionID, ev.EventID, ev.Synthetic = "tree-child", "tree-child-"+ev.EventID, true
		c.seq = ev.Seq
		c.publish(ev)
	}
	c.add(schema.TypeForkCommitted, `{"seedLength":11}`, synthetic)
	r.WaitSession(t, "tree-child", func(d httpapi.Detail) bool { return d.LastSeq == 12 && d.Status == projector.StatusIdle })
	r.WaitSession(t, "tree-parent", func(d httpapi.Detail) bool { return d.LastSeq == 21 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("the parent's tree",
		chromedp.Navigate(r.Srv.URL+"/?s=tree-parent"),
		chromedp.WaitVisible(chromedp.CSS(`#tree a[data-tree="tree-child"]`)),
	)
	if got := b.EvalString(`document.querySelector('#tree [data-cut]').getAttribute("href")`); got != "/?s=tree-parent&e=11" {
		t.Fatalf("the cut links to %q", got)
	}
	b.Shot("parent")
	b.Do("follow the link to the child",
		chromedp.Click(chromedp.CSS(`#tree a[data-tree="tree-child"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="tree-child"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tree a[data-tree="tree-parent"]`)),
	)
	b.Do("and back up to the parent",
		chromedp.Click(chromedp.CSS(`#tree a[data-tree="tree-parent"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="tree-parent"]`)),
	)
	b.NoPageErrors()
}

// TestDashboardResume: resuming a paused session from the page appends
// session/resumed through sessions.api.append; without the token, or
// with it only in a cookie or the query, or from another origin, or
// without the action header, it is refused and nothing is appended. The
// page asks for the token with its form (one in the address is not
// used, and is taken out of it), and again when the token is refused.
func TestDashboardResume(t *testing.T) {
	e := projectortest.NewEnv(t)
	startWriter(t, e)
	const token = "s3cret-token"
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.HTTPToken, c.Conn = token, e.NC })
	r.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("rs-1", projectortest.T0), 11) // created and one whole turn
	s := &script{t: t, e: e, id: "rs-1", seq: 11}
	s.add(schema.TypeSessionPaused, `{"reason":"operator hold"}`)
	waitStatus := func(status string) httpapi.Detail {
		return waitDetailToken(t, r, token, "rs-1", func(d httpapi.Detail) bool { return d.Status == status })
	}
	waitStatus(projector.StatusPaused)

	post := func(mod func(*http.Request)) int {
		req, _ := http.NewRequest("POST", r.Srv.URL+"/v1/sessions/rs-1/resume", strings.NewReader(`{}`))
		mod(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, c := range map[string]struct {
		mod  func(*http.Request)
		want int
	}{
		"NoToken": {func(q *http.Request) { q.Header.Set("X-Sessionlog-Action", "1") }, http.StatusUnauthorized},
		"CookieOnly": {func(q *http.Request) {
			q.Header.Set("X-Sessionlog-Action", "1")
			q.Header.Set("Cookie", "sessionlog_token="+token)
		}, http.StatusUnauthorized},
		"QueryToken": {func(q *http.Request) { q.Header.Set("X-Sessionlog-Action", "1"); q.URL.RawQuery = "token=" + token }, http.StatusUnauthorized},
		"AccessToken": {func(q *http.Request) {
			q.Header.Set("X-Sessionlog-Action", "1")
			q.URL.RawQuery = "access_token=" + token
		}, http.StatusUnauthorized},
		"NoHeader": {func(q *http.Request) { q.Header.Set("Authorization", "Bearer "+token) }, http.StatusForbidden},
		"OtherOrigin": {func(q *http.Request) {
			q.Header.Set("Authorization", "Bearer "+token)
			q.Header.Set("X-Sessionlog-Action", "1")
			q.Header.Set("Origin", "https://evil.example")
		}, http.StatusForbidden},
		"WrongToken": {func(q *http.Request) {
			q.Header.Set("Authorization", "Bearer nope")
			q.Header.Set("X-Sessionlog-Action", "1")
		}, http.StatusUnauthorized},
	} {
		if got := post(c.mod); got != c.want {
			t.Errorf("%s: status %d, want %d", name, got, c.want)
		}
	}

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	// An address of old carrying the token: the page is served, the token
	// is not taken (the form asks) and leaves the address.
	b.Login(r.Srv.URL+"/?token="+token+"&s=rs-1", token)
	b.Do("open the paused session",
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="rs-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#act-resume`)),
	)
	if got := b.EvalString(`location.search`); got != "?s=rs-1" {
		t.Fatalf("the token stayed in the address: %q", got)
	}
	if got := b.EvalString(`document.cookie`); got != "" {
		t.Fatalf("the page has cookies: %q", got)
	}
	// A wrong token in this tab: the resume is refused and the form asks
	// again.
	b.EvalString(`sessionStorage.setItem("sessionlog_token", "wrong"), ""`)
	b.Do("resume with a wrong token",
		chromedp.Click(chromedp.CSS(`#act-resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm input[name="by"]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#outcome.bad`)),
		chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
	)
	if got := b.Text(`#outcome`); !strings.Contains(got, "unauthorized") {
		t.Fatalf("outcome without the token: %q", got)
	}
	b.Shot("refused")
	b.Do("sign in again and resume",
		chromedp.SendKeys(chromedp.CSS(`#login-token`), token),
		chromedp.Click(chromedp.CSS(`#login-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="rs-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#act-resume`)),
		chromedp.Click(chromedp.CSS(`#act-resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm input[name="by"]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#outcome.ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="13"][data-type="session/resumed"]`)),
	)
	if got := b.Text(`#outcome`); !strings.Contains(got, "seq 13") {
		t.Fatalf("outcome: %q", got)
	}
	d := waitStatus(projector.StatusIdle)
	if d.LastSeq != 13 || d.LastType != schema.TypeSessionResumed {
		t.Fatalf("after the resume: seq %d %s, want 13 session/resumed (a refused request appended?)", d.LastSeq, d.LastType)
	}
	b.Shot("resumed")
	b.NoPageErrors()

	// Export reads the session through sessions.api.read, as JSON lines.
	req, _ := http.NewRequest("GET", r.Srv.URL+"/v1/sessions/rs-1/export", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != 200 || len(lines) != 13 || !strings.Contains(lines[12], `"session/resumed"`) {
		t.Fatalf("export: %d, %d lines, the last %.200q", resp.StatusCode, len(lines), lines[len(lines)-1])
	}
}

// TestDashboardRepairedOutcomeUnknown: a tool call a repair closed as
// outcome_unknown is marked, in words, as needing a check, and listed at
// the top of the session.
func TestDashboardRepairedOutcomeUnknown(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	s := newScript(t, e, "ou-1")
	s.add(schema.TypeSessionCreated, `{"title":"deploys"}`)
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t1"))
	s.add(schema.TypeToolRequested, `{"name":"deploy_prod","input":{"service":"api","version":"1.2.3"}}`, toolCall("t1", "c1"))
	s.add(schema.TypeToolStarted, `{}`, toolCall("t1", "c1"))
	st := session.New("ou-1")
	for i := range s.evs {
		if err := st.Apply(&s.evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	plan := session.PlanRepair(st, session.RepairOptions{Now: projectortest.T0})
	for _, ev := range plan {
		s.seq = ev.Seq
		s.publish(ev)
	}
	r.WaitSession(t, "ou-1", func(d httpapi.Detail) bool { return d.LastSeq == s.seq })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("open the repaired session",
		chromedp.Navigate(r.Srv.URL+"/?s=ou-1"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="ou-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#checks li[data-check]`)),
	)
	if got := b.Text(`#timeline .ev[data-type="tool/result"] .needs-check`); !strings.Contains(got, "repaired, needs a check") {
		t.Fatalf("the repaired result says %q", got)
	}
	if got := b.Text(`#attention`); !strings.Contains(got, "paused (repaired") || strings.Contains(got, "null") {
		t.Errorf("the attention card says %q", got)
	}
	if got := b.Text(`#checks`); !strings.Contains(got, "deploy_prod") || !strings.Contains(got, "by a repair") {
		t.Fatalf("the checks list says %q", got)
	}
	b.Do("expand the call", chromedp.Click(chromedp.CSS(`#timeline .ev[data-type="tool/result"] .txt`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-type="tool/result"] .body pre`)))
	if got := b.Text(`#timeline .ev[data-type="tool/result"] .body`); !strings.Contains(got, `"version": "1.2.3"`) {
		t.Fatalf("the call's input is not shown pretty-printed: %q", got)
	}
	b.Shot("needs-check")
	b.NoPageErrors()
}

// TestDashboardLongSession: a session of 10,003 events (1,000 turns with
// a tool call each) opens and shows every event within the bound (a
// correctness bound, not a speed target: the page reports how long it
// took, logged here). Before the incremental timeline it hung for more
// than 120 s: each event re-rendered the whole timeline.
func TestDashboardLongSession(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	const n = 10_003
	projectortest.PublishN(t, e, gen.NewSession("long", projectortest.T0), n)
	r.WaitSession(t, "long", func(d httpapi.Detail) bool { return d.LastSeq == n })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("start the browser", chromedp.Navigate("about:blank"))
	start := time.Now()
	b.Do("open the long session",
		chromedp.Navigate(r.Srv.URL+"/?s=long"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="1"]`)),
	)
	first := time.Since(start)
	b.Do("every event", chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="long"]`)))
	all := time.Since(start)
	if got := b.EvalInt(`document.querySelectorAll("#timeline .ev").length`); got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
	t.Logf("10,003 events: first rows after %v, all after %v; the page says %q; per page: %s", first, all, b.Text(`#loading`), b.EvalString(`JSON.stringify(window.__timing)`))
	b.Do("a link into the middle", chromedp.Navigate(r.Srv.URL+"/?s=long&e=7777"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev.cur[data-seq="7777"] .body`)))
	// Rows open from the keyboard and by a click, through the timeline's
	// one listener.
	b.Do("Enter on a row", chromedp.Focus(chromedp.CSS(`#timeline .ev[data-seq="7779"]`)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="7779"][aria-expanded="true"] .body`)))
	b.Do("a click on a row", chromedp.Click(chromedp.CSS(`#timeline .ev[data-seq="7781"] .txt`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="7781"][aria-expanded="true"] .body`)))
	b.Shot("long")
	b.NoPageErrors()
}

// TestDashboardShowsMarkupAsText: titles, agents, labels, messages, tool
// names and outputs holding HTML and script are shown as text in the
// list, the search results, the session, the fork tree and the expanded
// call; nothing runs and no element is made of them.
func TestDashboardShowsMarkupAsText(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	const img = `<img src=x onerror="window.__xss=1">`
	const scr = `<script>window.__xss=2</script>`
	mk := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	s := newScript(t, e, "xss")
	s.add(schema.TypeSessionCreated, `{"title":`+mk("markup "+img)+`,"agent":`+mk(scr)+`,"labels":{"host":`+mk(`<svg onload="window.__xss=3">`)+`,"cwd":"/tmp/<b>x</b>"}}`)
	s.add(schema.TypeTurnStarted, `{"input":`+mk(img)+`}`, inTurn("t1"))
	s.add(schema.TypeMessageUser, `{"content":`+mk("markup "+scr+img)+`}`, inTurn("t1"))
	s.add(schema.TypeToolRequested, `{"name":`+mk(img)+`,"input":{"html":`+mk(scr)+`}}`, toolCall("t1", "c1"))
	s.add(schema.TypeToolStarted, `{}`, toolCall("t1", "c1"))
	s.add(schema.TypeToolResult, `{"status":"error","output":`+mk(strings.Repeat(img+"\n", 50))+`}`, toolCall("t1", "c1"))
	c := newScript(t, e, "xss-child")
	c.add(schema.TypeSessionCreated, `{"title":`+mk(img)+`,"parent":{"sessionId":"xss","seedLength":1,"depth":1}}`, synthetic)
	c.add(schema.TypeForkCommitted, `{"seedLength":1}`, synthetic)
	r.WaitSession(t, "xss", func(d httpapi.Detail) bool { return d.LastSeq == 6 })
	r.WaitSession(t, "xss-child", func(d httpapi.Detail) bool { return d.LastSeq == 2 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("list, search, session, tree, expanded call",
		chromedp.Navigate(r.Srv.URL+"/?q=markup"),
		chromedp.WaitVisible(chromedp.CSS(`#list [data-session-id="xss"] mark`)),
		chromedp.Click(chromedp.CSS(`#list [data-session-id="xss"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="xss"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tree a[data-tree="xss-child"]`)),
		chromedp.Click(chromedp.CSS(`#timeline .ev[data-seq="6"] .txt`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="6"] .show-all`)),
		chromedp.Click(chromedp.CSS(`#timeline .ev[data-seq="6"] .show-all`)),
		chromedp.Click(chromedp.CSS(`#timeline .ev[data-seq="4"] .txt`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="4"] .body`)),
	)
	if got := b.Text(`#d-title`); got != "markup "+img {
		t.Fatalf("title shown as %q", got)
	}
	for sel, want := range map[string]string{
		`#list [data-session-id="xss"] .title`:                 "markup " + img,
		`#timeline .ev[data-seq="3"] .txt`:                     scr,
		`#timeline .ev[data-seq="4"] .txt b`:                   img,
		`#timeline .ev[data-seq="4"] .body`:                    `"html": "<script>`,
		`#timeline .ev[data-seq="6"] [data-part="output"] pre`: img,
		`#head`: `<svg onload`,
		`#tree`: img,
	} {
		if got := b.Text(sel); !strings.Contains(got, want) {
			t.Errorf("%s shows %q, want it to contain %q", sel, got, want)
		}
	}
	if got := b.EvalString(`String(window.__xss) + "," + document.querySelectorAll("#side img, #side script, #side svg, #detail img, #detail script, #detail svg, #detail b:not(:is(.txt > span > b))").length`); got != "undefined,0" {
		t.Fatalf("markup ran or was parsed: %q", got)
	}
	b.Shot("markup")
	b.NoPageErrors()
}

// TestDashboardForkFromPage: forking at an event from the page goes
// through sessions.api.fork; a cut inside a turn is refused with the
// reason and the nearest safe cuts, one of which forks.
func TestDashboardForkFromPage(t *testing.T) {
	e := projectortest.NewEnv(t)
	startForker(t, e)
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.Conn = e.NC })
	r.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("fk-parent", projectortest.T0), 21) // turns end at 11 and 21
	r.WaitSession(t, "fk-parent", func(d httpapi.Detail) bool { return d.LastSeq == 21 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("fork inside a turn",
		chromedp.Navigate(r.Srv.URL+"/?s=fk-parent&e=5"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="5"] .fork-here`)),
		chromedp.Click(chromedp.CSS(`#timeline .ev[data-seq="5"] .fork-here`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm input[name="seq"]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#outcome .safe-cut[data-seq="11"]`)),
	)
	if got := b.Text(`#outcome`); !strings.Contains(got, "unsafe_cut") || !strings.Contains(got, "not a safe cut") {
		t.Fatalf("the refusal says %q", got)
	}
	b.Shot("refused-cut")
	b.Do("fork at the nearest safe cut after",
		chromedp.Click(chromedp.CSS(`#outcome .safe-cut[data-seq="11"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm input[name="seq"]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#fork-child`)),
	)
	child := b.Text(`#fork-child`)
	d := r.WaitSession(t, child, func(d httpapi.Detail) bool { return d.Status == projector.StatusIdle })
	if d.Parent == nil || d.Parent.SessionID != "fk-parent" || d.Parent.SeedLength != 11 {
		t.Fatalf("the child's parent: %+v", d.Parent)
	}
	b.Do("the tree links the child", chromedp.WaitVisible(chromedp.CSS(`#tree a[data-tree="`+child+`"]`)))
	b.Shot("forked")
	b.NoPageErrors()
}

// TestDashboardShowsAbandoned: what a context/rewound abandoned stays in
// the timeline, marked abandoned; what came before its toSeq and after it
// is not.
func TestDashboardShowsAbandoned(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	s := newScript(t, e, "rw-1")
	s.add(schema.TypeSessionCreated, `{}`)
	s.add(schema.TypeMessageUser, `{"content":"one"}`)   // 2
	s.add(schema.TypeMessageUser, `{"content":"two"}`)   // 3
	s.add(schema.TypeMessageUser, `{"content":"three"}`) // 4
	s.add(schema.TypeContextRewound, `{"toEventId":"e2","toSeq":2}`)
	s.add(schema.TypeMessageUser, `{"content":"two, again"}`) // 6
	s.add(schema.TypeSessionTitled, `{"title":"rewound"}`)
	r.WaitSession(t, "rw-1", func(d httpapi.Detail) bool { return d.LastSeq == 7 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("open the rewound session",
		chromedp.Navigate(r.Srv.URL+"/?s=rw-1"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="rw-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="7"]`)),
	)
	if got := b.EvalString(`[...document.querySelectorAll("#timeline .ev.abandoned")].map(r => r.dataset.seq).join(" ")`); got != "3 4" {
		t.Errorf("abandoned rows %q, want 3 4", got)
	}
	if got := b.Text(`#timeline .ev[data-seq="5"]`); !strings.Contains(got, "continues from #2") {
		t.Errorf("the rewind says %q", got)
	}
	if got := b.Text(`#timeline .ev[data-seq="7"]`); !strings.Contains(got, "Titled: rewound") {
		t.Errorf("the title says %q", got)
	}
	b.NoPageErrors()
}
