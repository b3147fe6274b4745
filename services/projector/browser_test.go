package projector_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium page driven by a test: each step fails
// the test with what the page threw, and screenshots go to the artefact
// directory.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium at width x height; the page's uncaught
// exceptions are collected (see noPageErrors).
func newBrowser(t *testing.T, parent context.Context, width, height int) *browser {
	t.Helper()
	bin := chromiumPath(t)
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
	b := &browser{t: t, ctx: ctx}
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

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v (%d page errors, the first: %q)", what, err, len(b.errors), b.errors[:min(len(b.errors), 1)])
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

func (b *browser) evalString(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

func (b *browser) evalInt(js string) int {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](js))
	if err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// shot saves a full-page screenshot as <name>.png in the artefact
// directory (a failure to take one is logged, not fatal).
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := artifactDir(b.t)
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

// login opens url, where the page asks for the token (the server answered
// it 401), and signs in with token through the page's form, as a person
// does: the token is never in an address.
func (b *browser) login(url, token string) {
	b.t.Helper()
	b.do("sign in at "+url, chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
		chromedp.SendKeys(chromedp.CSS(`#login-token`), token),
		chromedp.Click(chromedp.CSS(`#login-ok`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#login`)))
}

// noPageErrors fails the test if the page threw.
func (b *browser) noPageErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Fatalf("page errors: %q", b.errors)
	}
}
