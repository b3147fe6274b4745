package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// watchCutter serves h, recording the Authorization and Last-Event-ID
// headers of every watch request; cut ends the watches open at the time,
// as a connection that broke would.
type watchCutter struct {
	h http.Handler

	mu      sync.Mutex
	seen    [][2]string // Authorization, Last-Event-ID
	cancels []context.CancelFunc
}

func (c *watchCutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/watch") {
		c.h.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c.mu.Lock()
	c.seen = append(c.seen, [2]string{r.Header.Get("Authorization"), r.Header.Get("Last-Event-ID")})
	c.cancels = append(c.cancels, cancel)
	c.mu.Unlock()
	c.h.ServeHTTP(w, r.WithContext(ctx))
}

func (c *watchCutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
	c.cancels = nil
}

func (c *watchCutter) watches() [][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// TestDashboardTenant: a tenant's token signs in to the dashboard through
// the page's form and sees only its tenant's sessions, in the list, in a
// search and by address (another tenant's answers not found, as a missing
// one does); what it may not do (the fleet's counts, the actions) is not
// offered. Its session's timeline grows live through the watch stream,
// read with the token in the Authorization header; when the stream breaks
// it reconnects with the token and Last-Event-ID, and what follows arrives
// once. Its export downloads with the token too.
func TestDashboardTenant(t *testing.T) {
	e := projectortest.NewEnv(t)
	const op, acme, beta = "operator-token-0123456789", "acme-token-0123456789", "beta-token-0123456789"
	r := e.Start(t.TempDir(), func(c *projector.Config) {
		c.HTTPToken = op
		c.TenantTokens = map[string]string{acme: "acme", beta: "beta"}
	})
	r.WaitReady(t)
	scripts := createTenantSessions(t, e, r, op, [][2]string{
		{"plain-1", `{"title":"zebra plain"}`},
		{"_Tacme_s1", `{"title":"zebra acme"}`},
		{"_Tacme_s2", `{"title":"zebra acme two"}`},
		{"_Tbeta_s1", `{"title":"zebra beta"}`},
	})
	cutter := &watchCutter{h: r.Handler()}
	front := httptest.NewServer(cutter)
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	listed := func() []string {
		got := strings.Fields(b.EvalString(`[...document.querySelectorAll("#list .row")].map(r => r.dataset.sessionId).join(" ")`))
		slices.Sort(got)
		return got
	}
	own := []string{"s1", "s2"} // as the tenant names them
	b.Login(front.URL+"/", acme)
	b.Do("the tenant's sessions listed",
		chromedp.WaitVisible(chromedp.CSS(`[data-session-id="s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-session-id="s2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-scope="tenant"] #overview`)))
	if got := listed(); !slices.Equal(got, own) {
		t.Errorf("listed %v, want %v", got, own)
	}
	if b.EvalInt(`document.querySelector('nav.top a[data-view-link="overview"]').offsetParent === null ? 1 : 0`) != 1 {
		t.Error("the fleet view is offered to a tenant's token")
	}
	b.Shot("tenant-list")

	b.Do("search", chromedp.Navigate(front.URL+"/?q=zebra"),
		chromedp.WaitVisible(chromedp.CSS(`#search-note`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-session-id="s2"]`)))
	if got := listed(); !slices.Equal(got, own) {
		t.Errorf("search found %v, want %v", got, own)
	}
	b.Do("another tenant's session", chromedp.Navigate(front.URL+"/?s=_Tbeta_s1"),
		chromedp.WaitVisible(chromedp.CSS(`#missing[data-missing="not-found"]`)))

	s := scripts["_Tacme_s1"]
	b.Do("open the tenant's session", chromedp.Navigate(front.URL+"/?s=s1"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="3"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#act-export`)))
	for _, id := range []string{"act-repair", "act-fork", "act-erase"} {
		if b.EvalInt(`document.getElementById("`+id+`").offsetParent === null ? 1 : 0`) != 1 {
			t.Errorf("#%s is offered to a tenant's token", id)
		}
	}
	s.add(schema.TypeTurnEnded, `{"reason":"completed"}`, inTurn("t1"))
	b.Do("the timeline grows live", chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="4"]`)))
	if got := b.Text(`#conn`); got != "live" {
		t.Errorf("the connection shows %q", got)
	}

	// The stream breaks: the page reconnects with the token and the last
	// id it saw, and gets what follows once.
	before := len(cutter.watches())
	cutter.cut()
	waitFor(t, func() bool { return len(cutter.watches()) > before })
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t2"))
	b.Do("the timeline grows after the reconnect", chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="5"]`)))
	w := cutter.watches()
	if first, again := w[before-1], w[before]; first != [2]string{"Bearer " + acme, ""} || again != [2]string{"Bearer " + acme, "4"} {
		t.Errorf("the watch was asked with %q, then reconnected with %q; want the token, then the token and Last-Event-ID 4", first, again)
	}
	if n := b.EvalInt(`document.querySelectorAll("#timeline .ev").length`); n != 5 {
		t.Errorf("the timeline holds %d events, want 5", n)
	}

	// The export is fetched with the token and saved.
	dir := t.TempDir()
	b.Do("export",
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
				Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir})
			return err
		}),
		chromedp.Click(chromedp.CSS(`#act-export`)))
	var lines []string
	waitFor(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "s1.jsonl"))
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return err == nil && len(lines) == 5
	})
	// The file is named as the tenant names the session; its lines are
	// the stored envelopes, as sessions.api.read gives them.
	for _, l := range lines {
		if !strings.Contains(l, `"_Tacme_s1"`) {
			t.Errorf("exported %.200q", l)
		}
	}
	b.Shot("tenant-session")
	b.NoPageErrors()
}
