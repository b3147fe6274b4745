package projector_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
)

// A stream whose last sequence goes below what the projector consumed (the
// node restored from an older copy of its store) raises log_rolled_back:
// the running projector's /readyz answers 503 with the reason, the metric
// is 1, /v1/overview carries it for the dashboard's banner; a projector
// started on the rolled back stream raises it too. A stream that only
// grows raises nothing.
func TestRolledBackProjector(t *testing.T) {
	dir := t.TempDir()
	port, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	run := func(store string) *server.Server {
		opts := natstest.Options(filepath.Join(dir, store))
		opts.Port = port
		s, err := natstest.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	stop := func(s *server.Server) { s.Shutdown(); s.WaitForShutdown() }
	srv := run("a")
	t.Cleanup(func() { stop(srv) })
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ls, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	e := &env{t: t, srv: srv, nc: nc, ls: ls, js: js, ctx: ctx}
	publishN(t, e, loadgen.NewSession("early", t0), 3)
	// The older copy of the store.
	stop(srv)
	if err := os.CopyFS(filepath.Join(dir, "b"), os.DirFS(filepath.Join(dir, "a"))); err != nil {
		t.Fatal(err)
	}
	srv = run("a")
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error { _, err := ls.StreamStatus(ctx, "SESSIONS"); return err })
	publishN(t, e, loadgen.NewSession("late", t0), 3)

	reg := prometheus.NewRegistry()
	data := t.TempDir()
	r := e.start(data, func(c *projector.Config) { c.Registerer, c.Gatherer = reg, reg })
	r.waitReady(t)
	r.waitSession(t, "late", func(d projector.Detail) bool { return d.LastSeq == 3 })
	// Grown, not rolled back: one check round passes with nothing raised.
	publishN(t, e, loadgen.NewSession("more", t0), 1)
	r.waitSession(t, "more", func(d projector.Detail) bool { return d.LastSeq == 1 })
	r.CheckStreams(ctx)
	if err := r.Ready(); err != nil {
		t.Fatalf("ready before the rollback: %v", err)
	}

	stop(srv)
	srv = run("b")
	var reason string
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		r.CheckStreams(ctx)
		err := r.Ready()
		if err == nil || !strings.Contains(err.Error(), "log_rolled_back") {
			return &rolledErr{err}
		}
		reason = err.Error()
		return nil
	})
	t.Log(reason)
	if !strings.Contains(reason, "stream SESSIONS ends at seq 3, but the projector consumed it up to seq 7") {
		t.Errorf("reason %q", reason)
	}
	if code, body := r.get(t, "/readyz"); code != 503 || !strings.Contains(string(body), "log_rolled_back") {
		t.Errorf("/readyz: %d %s", code, body)
	}
	var o projector.Overview
	r.getJSON(t, "/v1/overview", &o)
	if !strings.Contains(o.RolledBack, "log_rolled_back") {
		t.Errorf("overview rolledBack %q", o.RolledBack)
	}
	// The dashboard's banner.
	b := newBrowser(t, ctx, 1200, 800)
	b.do("open the dashboard", chromedp.Navigate(r.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#rolledback:not([hidden])`)))
	if banner := b.text(`#rolledback`); !strings.Contains(banner, "log_rolled_back") {
		t.Errorf("banner %q", banner)
	}
	mfs, err := reg.Gather()
	gauge := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "sessionlog_projector_log_rolled_back" {
			gauge = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if err != nil || gauge != 1 {
		t.Errorf("sessionlog_projector_log_rolled_back = %v (%v), want 1", gauge, err)
	}
	r.stop(t)

	// Started on the rolled back stream, with the checkpoint of seq 7.
	r2 := e.start(data)
	if err := r2.Ready(); err == nil || !strings.Contains(err.Error(), "log_rolled_back") {
		t.Fatalf("restarted: ready = %v", err)
	}
	stop(srv)
}

type rolledErr struct{ err error }

func (e *rolledErr) Error() string {
	if e.err == nil {
		return "ready, not rolled back"
	}
	return e.err.Error()
}
