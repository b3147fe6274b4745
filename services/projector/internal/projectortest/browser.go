package projectortest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is a headless Chromium page driven by a test: each step fails
// the test with what the page threw, and screenshots go to the artefact
// directory.
type Browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// NewBrowser starts Chromium at width x height; the page's uncaught
// exceptions are collected (see NoPageErrors).
func NewBrowser(t *testing.T, parent context.Context, width, height int) *Browser {
	t.Helper()
	bin := ChromiumPath(t)
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
		chromedp.WindowSize(width, height),
	)
	actx, cancelA := chromedp.NewExecAllocator(parent, opts...)
	t.Cleanup(cancelA)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(cancelC)
	ctx, cancelT := context.WithTimeout(ctx, 150*time.Second)
	t.Cleanup(cancelT)
	b := &Browser{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, func(ev any) {
		if ex, ok := ev.(*cdpruntime.EventExceptionThrown); ok {
			msg := ex.ExceptionDetails.Text
			if ex.ExceptionDetails.Exception != nil {
				msg += " " + ex.ExceptionDetails.Exception.Description
			}
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// Do runs actions; a failure fails the test with a screenshot.
func (b *Browser) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.Shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v (%d page errors, the first: %q)", what, err, len(b.errors), b.errors[:min(len(b.errors), 1)])
	}
}

// Text is the text of the element sel selects.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

// EvalString is the value of js, a string.
func (b *Browser) EvalString(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// EvalInt is the value of js, an int.
func (b *Browser) EvalInt(js string) int {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](js))
	if err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// Shot saves a full-page screenshot as <name>.png in the artefact
// directory (a failure to take one is logged, not fatal).
func (b *Browser) Shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := ArtifactDir(b.t)
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, b.t.Name()+"-"+name+".png")
	path = strings.ReplaceAll(path, "/"+b.t.Name(), "/"+strings.ReplaceAll(b.t.Name(), "/", "_"))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	abs, _ := filepath.Abs(path)
	b.t.Logf("screenshot: %s (%d bytes)", abs, len(png))
}

// Login opens url, where the page asks for the token (the server answered
// it 401), and signs in with token through the page's form, as a person
// does: the token is never in an address.
func (b *Browser) Login(url, token string) {
	b.t.Helper()
	b.Do("sign in at "+url, chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
		chromedp.SendKeys(chromedp.CSS(`#login-token`), token),
		chromedp.Click(chromedp.CSS(`#login-ok`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#login`)))
}

// NoPageErrors fails the test if the page threw.
func (b *Browser) NoPageErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Fatalf("page errors: %q", b.errors)
	}
}

// ChromiumPath finds Debian's chromium (or $SESSIONLOG_CHROMIUM). Its
// absence fails the test wherever it runs: the dashboard is checked in a
// real browser or not at all, and a test that skipped would pass unseen.
func ChromiumPath(t *testing.T) string {
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
	t.Fatal("chromium is not installed: apt-get install -y chromium (.ci/run does), or set SESSIONLOG_CHROMIUM to a Chromium binary")
	return ""
}

// ArtifactDir is where screenshots go: $SESSIONLOG_ARTEFACTS (or
// $SESSIONLOG_ARTIFACTS), else artifacts/ at the top of the repository
// (ignored by git), so the screenshots of the last run stay where a person
// can open them.
func ArtifactDir(t *testing.T) string {
	for _, v := range []string{"SESSIONLOG_ARTEFACTS", "SESSIONLOG_ARTIFACTS"} {
		if d := os.Getenv(v); d != "" {
			return d
		}
	}
	// The top of the repository: the first directory up from the test's
	// package that holds go.mod.
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "artifacts")
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
