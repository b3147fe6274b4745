package projector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
)

// script publishes hand-written events of one session straight to the
// stream, numbering them.
type script struct {
	t   *testing.T
	e   *env
	id  string
	seq uint64
	evs []schema.Envelope
}

func newScript(t *testing.T, e *env, id string) *script { return &script{t: t, e: e, id: id} }

func (s *script) add(typ, data string, mod ...func(*schema.Envelope)) schema.Envelope {
	s.t.Helper()
	s.seq++
	ev := schema.Envelope{
		SchemaVersion: schema.Version, SessionID: s.id, Seq: s.seq, EventID: fmt.Sprintf("%s-%d", s.id, s.seq),
		Time: t0.Add(time.Duration(s.seq) * time.Millisecond), Type: typ, Data: json.RawMessage(data),
	}
	for _, m := range mod {
		m(&ev)
	}
	s.publish(ev)
	return ev
}

func (s *script) publish(ev schema.Envelope) {
	s.t.Helper()
	if _, err := loadgen.Publish(s.e.ctx, s.e.ls, ev); err != nil {
		s.t.Fatalf("publish %s %s: %v", ev.Type, ev.Data, err)
	}
	s.evs = append(s.evs, ev)
}

func inTurn(turn string) func(*schema.Envelope) {
	return func(ev *schema.Envelope) { ev.TurnID = turn }
}

func toolCall(turn, call string) func(*schema.Envelope) {
	return func(ev *schema.Envelope) { ev.TurnID, ev.ToolCallID = turn, call }
}

// startWriter runs the writer (sessions.api.append, read) on the test's
// connection and waits until it answers.
func startWriter(t *testing.T, e *env) {
	t.Helper()
	w, err := assemble.NewWriter(assemble.DefaultWriter(), e.ls, assemble.Deps{Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(e.ctx) }()
	t.Cleanup(func() { <-done })
	body, _ := json.Marshal(api.ReadRequest{SessionID: "probe"})
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		_, err := e.nc.Request(api.SubjectRead, body, time.Second)
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
	e := newEnv(t)
	r := e.start(t.TempDir())
	r.waitReady(t)
	publishN(t, e, loadgen.NewSession("dl-a", t0), 25)
	publishN(t, e, loadgen.NewSession("dl-b", t0.Add(time.Minute)), 12)
	r.waitSession(t, "dl-a", func(d projector.Detail) bool { return d.LastSeq == 25 })
	r.waitSession(t, "dl-b", func(d projector.Detail) bool { return d.LastSeq == 12 })

	b := newBrowser(t, e.ctx, 1280, 860)
	b.do("open a pasted link",
		chromedp.Navigate(r.srv.URL+"/?s=dl-a&e=14"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-a"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev.cur[data-seq="14"] .body pre`)),
	)
	if got := b.text(`#d-title`); got != "load dl-a" {
		t.Fatalf("the link opened %q", got)
	}
	b.shot("deep-link")
	b.do("open another session from the list",
		chromedp.Click(chromedp.CSS(`#list [data-session-id="dl-b"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-b"]`)),
	)
	if got := b.evalString(`location.search`); got != "?s=dl-b" {
		t.Fatalf("the address of the second session is %q", got)
	}
	b.do("back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`#timeline .ev.cur[data-seq="14"]`)))
	if got := b.text(`#d-title`); got != "load dl-a" {
		t.Fatalf("back shows %q", got)
	}
	b.do("forward", chromedp.NavigateForward(), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-b"]`)))
	b.do("a status filter is an address too",
		chromedp.Navigate(r.srv.URL+"/?status=active"),
		chromedp.WaitVisible(chromedp.CSS(`#filters a.on[data-status="active"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview`)),
	)
	b.do("phone width",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(r.srv.URL+"/?s=dl-a"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="dl-a"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#head .back`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#side`)),
	)
	if w := b.evalInt(`document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at phone width the page is %d px wide", w)
	}
	b.shot("phone")
	b.noPageErrors()
}

// TestSearchIndex: GET /v1/search finds sessions by a word of their id,
// title, agent, labels, user and assistant messages, pages without
// repeating a session, says where the word is, and the index is a view:
// the live store equals a clean rebuild.
func TestSearchIndex(t *testing.T) {
	e := newEnv(t)
	r := e.start(t.TempDir())
	r.waitReady(t)
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
	r.waitSession(t, "srch-1", func(d projector.Detail) bool { return d.LastSeq == 5 })
	r.waitSession(t, "common-4", func(d projector.Detail) bool { return d.LastSeq == 1 })

	search := func(q string, after string, limit int) projector.SearchResult {
		t.Helper()
		var out projector.SearchResult
		r.getJSON(t, "/v1/search?q="+url.QueryEscape(q)+"&after="+after+"&limit="+fmt.Sprint(limit), &out)
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
	if code, body := r.get(t, "/v1/search?q=%3C%3E"); code != http.StatusBadRequest {
		t.Errorf("a query without words: %d %s", code, body)
	}
	checkRebuild(t, e, r)
}
