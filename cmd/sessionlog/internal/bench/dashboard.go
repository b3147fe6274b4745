package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// DashboardConfig configures the dashboard benchmark.
type DashboardConfig struct {
	Events int // of the session (default 10,000)
	Loads  int // timed page loads (default 5), after one to warm up
	// Chromium is the browser binary ("": $SESSIONLOG_CHROMIUM, then
	// chromium on the PATH).
	Chromium string
	Logger   *slog.Logger
	// JSProfile, if set, is where the last load's JavaScript CPU profile
	// is written (Chrome DevTools' .cpuprofile JSON: open it in the
	// browser's performance panel, or sum its nodes' self time).
	JSProfile string
}

// DashboardResult holds the times of each load, one per round.
type DashboardResult struct {
	Events int
	// Page: from navigating to the session's page until its last row is
	// drawn (body[data-loaded]). First: until its first row is. API: the
	// same pages of events fetched from the HTTP API by a Go client, what
	// the page asks for with nothing drawn: its floor.
	Page, First, API []time.Duration
	// Fetch and Draw: the page's own sums over its pages of events (its
	// window.__timing), per load: waiting for a page, and drawing it.
	Fetch, Draw []time.Duration
}

// The dashboard's page sizes (web/index.html FIRST_PAGE and PAGE): the
// floor asks for the same pages.
const dashboardFirstPage, dashboardPage = 200, 1000

// RunDashboard stores one session of cfg.Events events, serves the
// projector's dashboard and times loading the session in headless
// Chromium, taking turns with loading its events from the HTTP API.
func RunDashboard(ctx context.Context, cfg DashboardConfig) (DashboardResult, error) {
	res := DashboardResult{}
	if cfg.Events <= 0 {
		cfg.Events = 10_000
	}
	if cfg.Loads <= 0 {
		cfg.Loads = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	browser, err := chromiumPath(cfg.Chromium)
	if err != nil {
		return res, err
	}
	e, err := startEmbedded(ctx, "", "sessionlog-bench-dashboard-", cfg.Logger)
	if err != nil {
		return res, err
	}
	defer e.close()
	const id = "bench-dashboard"
	sess := gen.NewSession(id, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	// One unchecked publish: it reads the session's stored tail once to
	// chain the first event, not once per event.
	if _, err := e.st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) {
		for range cfg.Events {
			if !yield(sess.Next()) {
				return
			}
		}
	}); err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}
	last := sess.Seq()
	res.Events = int(last)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	p, err := assemble.NewProjector(assemble.DefaultProjector(filepath.Join(e.dir, "views")), e.st, assemble.Deps{Conn: e.nc, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return res, err
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() { stop(); <-done }()
	hs := httptest.NewServer(p.Handler())
	defer hs.Close()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if err := p.Ready(); err == nil {
			if n, err := apiEvents(ctx, hs.URL, id); err == nil && n == int(last) {
				break
			}
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the projector did not fold the session's %d events", last)
		}
		time.Sleep(20 * time.Millisecond)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 860))
	profile, err := os.MkdirTemp("", "sessionlog-bench-chromium-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(profile)
	opts = append(opts, chromedp.UserDataDir(profile))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		return res, fmt.Errorf("start %s: %w", browser, err)
	}
	page := hs.URL + "/?s=" + url.QueryEscape(id)
	for round := range cfg.Loads + 1 {
		var rows int
		lctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
		if err := chromedp.Do(lctx, chromedp.Navigate("about:blank")); err != nil {
			cancel()
			return res, err
		}
		profiling := cfg.JSProfile != "" && round == cfg.Loads
		if profiling {
			if err := chromedp.Do(lctx, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
				if _, err := cdp.Call(ctx, t, profiler.Enable, cdp.Empty{}); err != nil {
					return chromedp.Void{}, err
				}
				if _, err := cdp.Call(ctx, t, profiler.SetSamplingInterval, profiler.SetSamplingIntervalParams{Interval: 100}); err != nil {
					return chromedp.Void{}, err
				}
				_, err := cdp.Call(ctx, t, profiler.Start, cdp.Empty{})
				return chromedp.Void{}, err
			}); err != nil {
				cancel()
				return res, fmt.Errorf("start the JavaScript profile: %w", err)
			}
		}
		t0 := time.Now()
		var first time.Duration
		err := chromedp.Do(lctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="1"]`)))
		first = time.Since(t0)
		if err == nil {
			err = chromedp.Do(lctx, chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="`+id+`"]`)))
		}
		all := time.Since(t0)
		if err == nil && profiling {
			err = writeJSProfile(lctx, cfg.JSProfile)
		}
		if err == nil {
			rows, err = chromedp.Run(lctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline .ev").length`))
		}
		var fetchMs, drawMs int
		if err == nil {
			fetchMs, err = chromedp.Run(lctx, chromedp.Evaluate[int](`window.__timing.reduce((a, p) => a + p.fetchMs, 0)`))
		}
		if err == nil {
			drawMs, err = chromedp.Run(lctx, chromedp.Evaluate[int](`window.__timing.reduce((a, p) => a + p.drawMs, 0)`))
		}
		cancel()
		if err != nil {
			return res, fmt.Errorf("load the session's page: %w", err)
		}
		if rows != int(last) {
			return res, fmt.Errorf("the page drew %d rows of %d events", rows, last)
		}
		t1 := time.Now()
		n, err := apiEvents(ctx, hs.URL, id)
		api := time.Since(t1)
		if err != nil {
			return res, err
		}
		if n != int(last) {
			return res, fmt.Errorf("the API gave %d of %d events", n, last)
		}
		if round > 0 { // the first round warms the caches
			res.Page = append(res.Page, all)
			res.First = append(res.First, first)
			res.API = append(res.API, api)
			res.Fetch = append(res.Fetch, time.Duration(fetchMs)*time.Millisecond)
			res.Draw = append(res.Draw, time.Duration(drawMs)*time.Millisecond)
		}
	}
	return res, nil
}

// writeJSProfile stops the page's JavaScript profiler and writes its
// profile to path.
func writeJSProfile(ctx context.Context, path string) error {
	res, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (profiler.StopResult, error) {
		return cdp.Call(ctx, t, profiler.Stop, cdp.Empty{})
	})
	if err != nil {
		return fmt.Errorf("stop the JavaScript profile: %w", err)
	}
	b, err := json.Marshal(res.Profile)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// apiEvents fetches a session's events from the HTTP API in the pages
// the dashboard asks for and returns how many it got.
func apiEvents(ctx context.Context, base, id string) (int, error) {
	n := 0
	for after, limit := uint64(0), dashboardFirstPage; ; limit = dashboardPage {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+url.PathEscape(id)+"/events?limit="+strconv.Itoa(limit)+"&after="+strconv.FormatUint(after, 10), nil)
		if err != nil {
			return n, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return n, err
		}
		var page struct {
			Events []json.RawMessage `json:"events"`
			Next   uint64            `json:"next"`
			More   bool              `json:"more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return n, fmt.Errorf("GET events: %s", resp.Status)
		}
		if err != nil {
			return n, err
		}
		n += len(page.Events)
		if !page.More {
			return n, nil
		}
		if page.Next <= after {
			return n, errors.New("GET events: the next page does not move on")
		}
		after = page.Next
	}
}

// chromiumPath finds the browser: path if given, else
// $SESSIONLOG_CHROMIUM, else chromium (or chromium-browser) on the PATH.
func chromiumPath(path string) (string, error) {
	for _, p := range []string{path, os.Getenv("SESSIONLOG_CHROMIUM")} {
		if p != "" {
			return p, nil
		}
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium: install chromium (apt-get install -y chromium) or name it with --chromium or SESSIONLOG_CHROMIUM")
}
