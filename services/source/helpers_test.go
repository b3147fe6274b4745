package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/source"
	"github.com/sessionlog/sessionlog/services/writer"
)

// env is one embedded server, a store, a running writer and the source
// service, which appends and reads through it.
type env struct {
	srv *server.Server
	nc  *nats.Conn
	st  *logstore.Store
	src *source.Service
}

type envOpts struct {
	source source.Config
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{srv: natstest.RunServerDir(t, t.TempDir())}
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e.nc = nc
	if e.st, err = logstore.Open(context.Background(), nc, logstore.Config{}); err != nil {
		t.Fatal(err)
	}
	w, err := writer.New(writer.Config{Store: e.st, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w.Run, w.Ready)
	o.source.Store, o.source.Conn = e.st, nc
	if e.src, err = source.New(o.source); err != nil {
		t.Fatal(err)
	}
	run(t, e.src.Run, e.src.Ready)
	return e
}

// run runs a service until the test ends, once it is ready.
func run(t testing.TB, fn func(context.Context) error, ready func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, ready)
}

// reply is a decoded answer: the body, and the error it carries.
type reply struct {
	err *api.ErrorDetail
	raw []byte
}

func (r reply) code() string {
	if r.err == nil {
		return "ok"
	}
	return string(r.err.Code)
}

// request sends body as JSON and decodes the answer.
func request(t *testing.T, nc *nats.Conn, subject string, body any) reply {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(subject, b, 20*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	r := reply{raw: m.Data}
	if h := m.Header.Get(micro.ErrorCodeHeader); h != "" {
		var eb api.ErrorBody
		if err := json.Unmarshal(m.Data, &eb); err != nil || string(eb.Error.Code) != h {
			t.Fatalf("error reply %q (header %q): %v", m.Data, h, err)
		}
		r.err = &eb.Error
	}
	return r
}

// stored is the session's stored events.
func stored(t *testing.T, st *logstore.Store, sid string) []logstore.Event {
	t.Helper()
	evs, _, err := st.ReadEvents(context.Background(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// counterSum is a counter family's value: the series whose labels include
// the pairs given, added.
func counterSum(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			match := mf.GetName() == name
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && have[labels[i]] == labels[i+1]
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// userEntry is the i-th entry of a Claude Code transcript of prompts of
// size bytes, uuids <prefix>-<i>, each entry's parent the one before.
func userEntry(sid, prefix string, i, size int) json.RawMessage {
	parent := "null"
	if i > 0 {
		parent = fmt.Sprintf(`"%s-%d"`, prefix, i-1)
	}
	return json.RawMessage(fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"sessionId":%q,"type":"user","message":{"role":"user","content":%q},"uuid":"%s-%d","timestamp":"2026-12-04T09:00:00.000Z"}`,
		parent, sid, strings.Repeat("x", size), prefix, i))
}
