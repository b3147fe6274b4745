package projector_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
)

// chromiumPath finds Debian's chromium. Under CI its absence fails the
// test: the dashboard must be checked in a real browser there.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("SESSIONLOG_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); the dashboard test must run in CI")
	}
	t.Skip("chromium not installed; set CI=true to make this a failure")
	return ""
}

func artifactDir(t *testing.T) string {
	if d := os.Getenv("SESSIONLOG_ARTIFACTS"); d != "" {
		return d
	}
	if os.Getenv("CI") == "true" {
		return filepath.Join("..", "..", "artifacts")
	}
	return t.TempDir()
}

// TestDashboardInChromium drives the embedded dashboard in headless
// Chromium: a session appended during the test appears in the list, and
// its timeline grows live through the watch stream, without a reload.
func TestDashboardInChromium(t *testing.T) {
	bin := chromiumPath(t)
	e := newEnv(t)
	r := e.start(t.TempDir())
	r.waitReady(t)
	first := loadgen.NewSession("dash-first", t0.Add(-time.Hour))
	publishN(t, e, first, 12)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(e.ctx, opts...)
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	do("open the dashboard",
		chromedp.Navigate(r.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-session-id="dash-first"]`)),
	)
	// A marker that a reload would wipe.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload = 42`)); err != nil {
		t.Fatal(err)
	}

	// A session appended while the page is open shows up in the list.
	live := loadgen.NewSession("dash-live", t0)
	publishN(t, e, live, 5) // created, turn/started, user message, attempt, assistant
	do("new session listed", chromedp.WaitVisible(chromedp.CSS(`[data-session-id="dash-live"]`)))

	do("open its timeline",
		chromedp.Click(chromedp.CSS(`[data-session-id="dash-live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="5"]`)),
	)
	// More events arrive: the timeline grows through the watch stream.
	publishN(t, e, live, 3) // tool requested, started, result
	do("timeline updates live", chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="8"]`)))

	// A transient event is shown as live output.
	subj, _ := logstore.LiveSubject("dash-live")
	b, _ := json.Marshal(map[string]any{"afterSeq": 8, "kind": "delta", "text": "streaming tokens…"})
	deadline := time.Now().Add(20 * time.Second)
	for tr := ""; !strings.Contains(tr, "streaming tokens"); tr = text(`#transient`) {
		if time.Now().After(deadline) {
			t.Fatalf("transient event not shown: %q", tr)
		}
		e.nc.Publish(subj, b)
		e.nc.Flush()
		do("wait", chromedp.Sleep(200*time.Millisecond))
	}

	marker, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload`))
	if err != nil || marker != 42 {
		t.Fatalf("the page reloaded (marker %d, %v)", marker, err)
	}
	if phase := text(`#timeline .ev[data-seq="7"] .phase`); phase != "started" {
		t.Fatalf("tool/started shown with phase %q", phase)
	}
	if status := text(`[data-session-id="dash-live"] .pill`); !strings.EqualFold(status, "active") {
		t.Fatalf("the open turn's session is shown as %q", status)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := artifactDir(t)
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	t.Logf("dashboard screenshot: %s (%d bytes)", abs, len(shot))
}
