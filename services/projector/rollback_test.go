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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// A stream whose last sequence goes below what the projector consumed (the
// node restored from an older copy of its store) raises log_rolled_back:
// the running projector's /readyz answers 503 with the reason, the metric
// is 1, /v1/overview carries it for the dashboard's banner; a projector
// started on the rolled back stream raises it too. A stream that only
// grows raises nothing.
func TestRolledBackProjector(t *testing.T) {
	rs := newRollbackServer(t)
	e, ctx := rs.e, rs.e.Ctx
	projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
	rs.copyTo("b") // the older copy of the store
	projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)

	reg := prometheus.NewRegistry()
	data := t.TempDir()
	r := e.Start(data, func(c *projector.Config) { c.Registerer, c.Gatherer = reg, reg })
	r.WaitReady(t)
	r.WaitSession(t, "late", func(d httpapi.Detail) bool { return d.LastSeq == 3 })
	// Grown, not rolled back: one check round passes with nothing raised.
	projectortest.PublishN(t, e, gen.NewSession("more", projectortest.T0), 1)
	r.WaitSession(t, "more", func(d httpapi.Detail) bool { return d.LastSeq == 1 })
	r.CheckStreams(ctx)
	if err := r.Ready(); err != nil {
		t.Fatalf("ready before the rollback: %v", err)
	}

	// A stale answer (a node woken from a pause answers from its old
	// state until it hears the new leader) followed by the real one
	// raises nothing.
	rs.restart("b")
	r.CheckStreams(ctx)
	rs.restart("a")
	r.CheckStreams(ctx)
	if err := r.Ready(); err != nil {
		t.Fatalf("ready after a stale answer: %v", err)
	}

	rs.restart("b")
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
	if code, body := r.Get(t, "/readyz"); code != 503 || !strings.Contains(string(body), "log_rolled_back") {
		t.Errorf("/readyz: %d %s", code, body)
	}
	var o httpapi.Overview
	r.GetJSON(t, "/v1/overview", &o)
	if !strings.Contains(o.RolledBack, "log_rolled_back") {
		t.Errorf("overview rolledBack %q", o.RolledBack)
	}
	// The dashboard's banner.
	b := projectortest.NewBrowser(t, ctx, 1200, 800)
	b.Do("open the dashboard", chromedp.Navigate(r.Srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#rolledback:not([hidden])`)))
	if banner := b.Text(`#rolledback`); !strings.Contains(banner, "log_rolled_back") {
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
	r.Stop(t)

	// Started on the rolled back stream, with the checkpoint of seq 7.
	r2 := e.Start(data)
	if err := r2.Ready(); err == nil || !strings.Contains(err.Error(), "log_rolled_back") {
		t.Fatalf("restarted: ready = %v", err)
	}
}

// A log that lost messages and stored others in their place before the
// projector looked (the writers overtook the loss) raises log_rolled_back
// too: the message at the consumed sequence is another one.
func TestRolledBackOvertaken(t *testing.T) {
	rs := newRollbackServer(t)
	e, ctx := rs.e, rs.e.Ctx
	projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
	rs.copyTo("b")
	projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	r.WaitSession(t, "late", func(d httpapi.Detail) bool { return d.LastSeq == 3 })

	rs.restart("b")
	projectortest.PublishN(t, e, gen.NewSession("other", projectortest.T0), 4) // seqs 4..7 of the stream
	r.CheckStreams(ctx)
	err := r.Ready()
	if err == nil || !strings.Contains(err.Error(), "log_rolled_back") || !strings.Contains(err.Error(), "at seq 6, but the projector consumed") {
		t.Fatalf("ready = %v, want log_rolled_back naming seq 6", err)
	}
	t.Log(err)
}

// A damaged block file that nats-server cuts at the damage, keeping the
// stream's last sequence, leaves no lower sequence to see: the message the
// projector consumed last is gone, its session has no erasure record, and
// log_rolled_back is raised once it has stayed gone (a restarted
// projector, on the checkpoint naming that message).
func TestRolledBackDamagedBlock(t *testing.T) {
	rs := newRollbackServer(t)
	e, ctx := rs.e, rs.e.Ctx
	projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
	projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)
	data := t.TempDir()
	r := e.Start(data)
	r.WaitReady(t)
	r.WaitSession(t, "late", func(d httpapi.Detail) bool { return d.LastSeq == 3 })
	r.Stop(t)

	// A bit of the last message's record flipped while the server is
	// down: the server serves the stream without it and keeps its last
	// sequence.
	rs.stop()
	blks, err := filepath.Glob(filepath.Join(rs.dir, "a", "jetstream", "*", "streams", "SESSIONS", "msgs", "*.blk"))
	if err != nil || len(blks) != 1 {
		t.Fatalf("block files %v (%v)", blks, err)
	}
	b, err := os.ReadFile(blks[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-40] ^= 0x10
	if err := os.WriteFile(blks[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	rs.restart("a")
	st, err := e.LS.StreamStatus(ctx, "SESSIONS")
	if err != nil || st.LastSeq != 6 {
		t.Fatalf("stream after the damage: %+v (%v), want last seq 6 kept", st, err)
	}
	if m, err := e.LS.MsgAt(ctx, "SESSIONS", 6); err != nil || m != nil {
		t.Fatalf("seq 6 after the damage: %v (%v), want gone", m, err)
	}

	r2 := e.Start(data)
	var reason string
	natstest.CheckFor(t, 40*time.Second, 200*time.Millisecond, func() error {
		r2.CheckStreams(ctx)
		err := r2.Ready()
		if err == nil || !strings.Contains(err.Error(), "log_rolled_back") {
			return &rolledErr{err}
		}
		reason = err.Error()
		return nil
	})
	t.Log(reason)
	if !strings.Contains(reason, "no longer holds seq 6") || !strings.Contains(reason, "of session late") {
		t.Errorf("reason %q", reason)
	}
}

// rollbackServer is one nats-server on a port that stays, whose store can
// be copied and swapped: a node restored from an older copy.
type rollbackServer struct {
	t    *testing.T
	dir  string
	port int
	srv  *server.Server
	e    *projectortest.Env
}

func newRollbackServer(t *testing.T) *rollbackServer {
	port, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	rs := &rollbackServer{t: t, dir: t.TempDir(), port: port}
	rs.run("a")
	t.Cleanup(rs.stop)
	nc, err := nats.Connect(rs.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
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
	rs.e = &projectortest.Env{T: t, Srv: rs.srv, NC: nc, LS: ls, Ctx: ctx}
	return rs
}

func (rs *rollbackServer) run(store string) {
	opts := natstest.Options(filepath.Join(rs.dir, store))
	opts.Port = rs.port
	s, err := natstest.Start(opts)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.srv = s
}

func (rs *rollbackServer) stop() { rs.srv.Shutdown(); rs.srv.WaitForShutdown() }

// restart serves the store named store, once the client is back.
func (rs *rollbackServer) restart(store string) {
	rs.t.Helper()
	rs.stop()
	rs.run(store)
	natstest.CheckFor(rs.t, 10*time.Second, 20*time.Millisecond, func() error {
		_, err := rs.e.LS.StreamStatus(rs.e.Ctx, "SESSIONS")
		return err
	})
}

// copyTo copies the store "a" as it is now to store.
func (rs *rollbackServer) copyTo(store string) {
	rs.t.Helper()
	rs.stop()
	if err := os.CopyFS(filepath.Join(rs.dir, store), os.DirFS(filepath.Join(rs.dir, "a"))); err != nil {
		rs.t.Fatal(err)
	}
	rs.restart("a")
}

type rolledErr struct{ err error }

func (e *rolledErr) Error() string {
	if e.err == nil {
		return "ready, not rolled back"
	}
	return e.err.Error()
}
