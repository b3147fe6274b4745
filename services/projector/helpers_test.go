package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

type env struct {
	t   *testing.T
	srv *server.Server
	nc  *nats.Conn
	ls  *logstore.Store
	// js is the tests' superuser path to the stream (raw messages the
	// store would never build); the projector has none.
	js  jetstream.JetStream
	ctx context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvLayout(t, natstest.Layout{Partitions: 1, Nodes: 1})
}

// newEnvPartitions is newEnv on a store of that many partitions.
func newEnvPartitions(t *testing.T, partitions int) *env {
	t.Helper()
	return newEnvLayout(t, natstest.Layout{Partitions: partitions, Nodes: 1})
}

// newEnvLayout is newEnv on the servers of layout l: a store of its
// partitions with a replica on each of its nodes, every stream led and
// current before the test starts.
func newEnvLayout(t *testing.T, l natstest.Layout) *env {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ls, err := logstore.Open(ctx, nc, logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	return &env{t: t, srv: d.Server, nc: nc, ls: ls, js: js, ctx: ctx}
}

// running is a projector started by a test.
type running struct {
	*projector.Service
	srv    *httptest.Server
	cancel context.CancelFunc
	done   chan error
}

func (e *env) start(dir string, mod ...func(*projector.Config)) *running {
	e.t.Helper()
	return e.startPrepared(dir, nil, mod...)
}

// startPrepared is start with prepare, if set, called on the service
// before it runs.
func (e *env) startPrepared(dir string, prepare func(*projector.Service), mod ...func(*projector.Config)) *running {
	e.t.Helper()
	cfg := projector.Config{Store: e.ls, DataDir: dir, Heartbeat: 200 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := projector.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if prepare != nil {
		prepare(s)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	r := &running{Service: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	r.srv = httptest.NewServer(s.Handler())
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

func (r *running) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.srv.CloseClientConnections()
	r.srv.Close()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("projector Run: %v", err)
	}
	r.cancel = nil
}

func (r *running) waitReady(t *testing.T) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, r.Ready)
}

// waitSeq waits until the session's view reaches seq (or status).
func (r *running) waitSession(t *testing.T, id string, ok func(httpapi.Detail) bool) httpapi.Detail {
	t.Helper()
	var d httpapi.Detail
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		code, body := r.get(t, "/v1/sessions/"+id)
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

func (r *running) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(r.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (r *running) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, b := r.get(t, path)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// clusterEnv is an env on a three-node cluster whose streams have three
// replicas, connected to every node.
func clusterEnv(t *testing.T) (*natstest.Cluster, *env) {
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
	js, _ := jetstream.New(nc)
	e := &env{t: t, srv: c.Servers[0], nc: nc, ls: ls, js: js, ctx: ctx}
	return c, e
}

// openCheckpoint opens the store of a stopped projector in dir and reads
// its checkpoint; the caller closes the store.
func openCheckpoint(t *testing.T, dir string) (*store.DB, store.Checkpoint) {
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
