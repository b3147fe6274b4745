// Package projectortest starts real projectors for tests: an embedded
// NATS server with JetStream, a log store on it, a projector on a real
// Pebble store, its HTTP side on an httptest server, readers of its
// answers (the watch's SSE), a headless Chromium page for the dashboard
// (Browser), and checks that read the running projector's views and log
// (CheckRebuild, ListExamined, AgentIndexed, and the Whole answers the
// streamed ones are compared with). The projector's tests and those of
// its HTTP side (package httpapi) share it.
package projectortest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// T0 is the time the tests' generated sessions start at.
var T0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// Env is a NATS server (or cluster) with JetStream and a log store on it.
type Env struct {
	T   *testing.T
	Srv *server.Server
	NC  *nats.Conn
	LS  *logstore.Store
	Ctx context.Context
}

// NewEnv is an Env of one partition on one node.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	return NewEnvLayout(t, natstest.Layout{Partitions: 1, Nodes: 1})
}

// NewEnvPartitions is NewEnv on a store of that many partitions.
func NewEnvPartitions(t *testing.T, partitions int) *Env {
	t.Helper()
	return NewEnvLayout(t, natstest.Layout{Partitions: partitions, Nodes: 1})
}

// NewEnvLayout is NewEnv on the servers of layout l: a store of its
// partitions with a replica on each of its nodes, every stream led and
// current before the test starts.
func NewEnvLayout(t *testing.T, l natstest.Layout) *Env {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ls, err := logstore.Open(ctx, nc, logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	return &Env{T: t, Srv: d.Server, NC: nc, LS: ls, Ctx: ctx}
}

// Running is a projector started by a test.
type Running struct {
	*projector.Service
	// Srv serves the projector's Handler.
	Srv    *httptest.Server
	cancel context.CancelFunc
	done   chan error
}

// Start starts a projector on e's log with its store in dir, its Config
// changed by mod; it stops when the test ends.
func (e *Env) Start(dir string, mod ...func(*projector.Config)) *Running {
	e.T.Helper()
	return e.StartPrepared(dir, nil, mod...)
}

// StartPrepared is Start with prepare, if set, called on the service
// before it runs.
func (e *Env) StartPrepared(dir string, prepare func(*projector.Service), mod ...func(*projector.Config)) *Running {
	e.T.Helper()
	cfg := projector.Config{Store: e.LS, DataDir: dir, Heartbeat: 200 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := projector.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	if prepare != nil {
		prepare(s)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	r := &Running{Service: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	r.Srv = httptest.NewServer(s.Handler())
	e.T.Cleanup(func() { r.Stop(e.T) })
	return r
}

// Stop stops the projector and its HTTP server (once).
func (r *Running) Stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.Srv.CloseClientConnections()
	r.Srv.Close()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("projector Run: %v", err)
	}
	r.cancel = nil
}

// WaitReady waits until the projector is ready.
func (r *Running) WaitReady(t *testing.T) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, r.Ready)
}

// WaitSession waits until GET /v1/sessions/{id} answers a detail ok
// accepts, and returns it.
func (r *Running) WaitSession(t *testing.T, id string, ok func(httpapi.Detail) bool) httpapi.Detail {
	t.Helper()
	var d httpapi.Detail
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		code, body := r.Get(t, "/v1/sessions/"+id)
		if code != 200 {
			return fmt.Errorf("status %d: %s", code, body)
		}
		d = httpapi.Detail{}
		if err := json.Unmarshal(body, &d); err != nil {
			return err
		}
		if !ok(d) {
			return fmt.Errorf("session %s not there yet: status %s lastSeq %d", id, d.Status, d.LastSeq)
		}
		return nil
	})
	return d
}

// URL is the root of the projector's HTTP side.
func (r *Running) URL() string { return r.Srv.URL }

// Get is GET path of the projector's HTTP side: status and body.
func (r *Running) Get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	return get(t, r.Srv.URL+path)
}

// get is GET url: status and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// GetJSON is GET path, which must answer 200, decoded into v.
func (r *Running) GetJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, b := r.Get(t, path)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// ClusterEnv is an Env on a three-node cluster whose streams have three
// replicas, connected to every node.
func ClusterEnv(t *testing.T) (*natstest.Cluster, *Env) {
	t.Helper()
	c := natstest.RunCluster(t, 3)
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ls, err := logstore.Open(ctx, nc, logstore.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Srv: c.Servers[0], NC: nc, LS: ls, Ctx: ctx}
	return c, e
}

// OpenCheckpoint opens the store of a stopped projector in dir and reads
// its checkpoint; the caller closes the store.
func OpenCheckpoint(t *testing.T, dir string) (*store.DB, store.Checkpoint) {
	t.Helper()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cp, _, err := db.Checkpoint()
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, cp
}

// Erase erases session id as the eraser does (by "test", reason "r"):
// marked, its events deleted, its audit record written. The record names
// no owner, as those written before records named them (the projector
// then takes the owner it kept, ErasedOwnerKey); the eraser's own are
// read in TestTenantAuditOwnerFromRecord.
func (e *Env) Erase(id string) logstore.Erasure {
	e.T.Helper()
	rec, _, err := e.LS.MarkErased(e.Ctx, logstore.Erasure{SessionID: id, By: "test", Reason: "r", ErasedAt: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		e.T.Fatal(err)
	}
	if _, err := e.LS.EraseEvents(e.Ctx, id, nil); err != nil {
		e.T.Fatal(err)
	}
	if err := e.LS.WriteAudit(e.Ctx, rec.Audit()); err != nil {
		e.T.Fatal(err)
	}
	return rec
}

// PublishN appends the next n events of s to e's log.
func PublishN(t *testing.T, e *Env, s *gen.Session, n int) []schema.Envelope {
	t.Helper()
	var out []schema.Envelope
	for range n {
		ev := s.Next()
		if _, err := gen.Publish(e.Ctx, e.LS, ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// SSEEvent is one event of a watch stream.
type SSEEvent struct {
	ID, Kind string
	Data     httpapi.WatchEvent
	Raw      string // the data line as sent
}

// SSE reads a watch stream and delivers its events (pings as kind "ping").
func SSE(t *testing.T, ctx context.Context, url, lastEventID string) (<-chan SSEEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	ch := make(chan SSEEvent, 1000)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur SSEEvent
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.Kind != "" {
					cur.Raw = data
					json.Unmarshal([]byte(data), &cur.Data)
					ch <- cur
				}
				cur, data = SSEEvent{}, ""
			case line == ": ping":
				ch <- SSEEvent{Kind: "ping"}
			case strings.HasPrefix(line, "id: "):
				cur.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.Kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			}
		}
	}()
	return ch, resp
}

// Next is the next event of a watch stream (pings too unless skipPings),
// within 10 seconds.
func Next(t *testing.T, ch <-chan SSEEvent, skipPings bool) SSEEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch stream ended")
			}
			if ev.Kind == "ping" && skipPings {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event within 10s")
		}
	}
}

// ReadSSE parses an SSE stream until it ends, calling fn for each event
// (pings skipped); the data of an "error" event is in raw.
func ReadSSE(body io.Reader, fn func(id, kind string, data httpapi.WatchEvent, raw string)) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id, kind, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if kind != "" {
				var ev httpapi.WatchEvent
				if kind != "error" {
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						return fmt.Errorf("event %s %s: %w", id, kind, err)
					}
				}
				fn(id, kind, ev, data)
			}
			id, kind, data = "", "", ""
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		}
	}
	return sc.Err()
}

// CounterValue is the value of counter name with a label of value label
// (0: none) that g gathers.
func CounterValue(t *testing.T, g prometheus.Gatherer, name, label string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
