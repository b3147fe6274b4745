package writer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// env is one embedded server, a store and a running writer.
type env struct {
	srv *server.Server
	nc  *nats.Conn
	st  *logstore.Store
	w   *writer.Service
	dir string
	// url reaches every node the env's servers run on.
	url string
	// dep is the layout's servers (newEnvLayout).
	dep *natstest.Deployment
}

type envOpts struct {
	store  logstore.Config
	writer writer.Config
	srv    *server.Server
	url    string
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{srv: o.srv}
	url := o.url
	if e.srv == nil && url == "" {
		e.dir = t.TempDir()
		e.srv = natstest.RunServerDir(t, e.dir)
	}
	if url == "" {
		url = e.srv.ClientURL()
	}
	e.url = url
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e.nc = nc
	e.st, err = logstore.Open(context.Background(), nc, o.store)
	if err != nil {
		t.Fatal(err)
	}
	e.w = startWriter(t, e.st, nc, o.writer)
	return e
}

// newEnvLayout is newEnv on the servers of layout l: a store of its
// partitions with a replica on each of its nodes, every stream led and
// current before the test starts.
func newEnvLayout(t *testing.T, l natstest.Layout, o envOpts) *env {
	t.Helper()
	d := natstest.RunLayout(t, l)
	o.url = d.URL
	o.store.Partitions, o.store.Replicas = l.Partitions, l.Replicas()
	e := newEnv(t, o)
	e.srv, e.dep = d.Server, d
	d.WaitLeaders(e.nc)
	return e
}

// startWriter runs a writer on st that serves on nc unless cfg names
// another connection.
func startWriter(t testing.TB, st *logstore.Store, nc *nats.Conn, cfg writer.Config) *writer.Service {
	t.Helper()
	cfg.Store = st
	if cfg.Conn == nil {
		cfg.Conn = nc
	}
	w, stop := runService(t, cfg)
	t.Cleanup(stop)
	return w
}

// runService builds and runs a writer until stop, which waits for it to
// return (and for the snapshots it is writing).
func runService(t testing.TB, cfg writer.Config) (*writer.Service, func()) {
	t.Helper()
	w, err := writer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("writer Run: %v", err)
			}
		})
	}
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, w.Ready)
	return w, stop
}

// reply is a decoded answer of the writer.
type reply struct {
	ok     writer.AppendReply
	err    *writer.ErrorDetail
	header string // Nats-Service-Error-Code
	raw    []byte
}

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }

func (r reply) code() string {
	if r.err == nil {
		return "ok"
	}
	return string(r.err.Code)
}

func request(t *testing.T, nc *nats.Conn, subject string, body any) reply {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	m, err := nc.Request(subject, b, 20*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	return decodeReply(t, m)
}

func decodeReply(t *testing.T, m *nats.Msg) reply {
	t.Helper()
	r := reply{raw: m.Data}
	r.header = m.Header.Get(micro.ErrorCodeHeader)
	if r.header != "" {
		var eb writer.ErrorBody
		if err := json.Unmarshal(m.Data, &eb); err != nil {
			t.Fatalf("error reply %q: %v", m.Data, err)
		}
		if string(eb.Error.Code) != r.header {
			t.Fatalf("error header %q, body code %q", r.header, eb.Error.Code)
		}
		r.err = &eb.Error
		return r
	}
	if m.Subject != "" && json.Unmarshal(m.Data, &r.ok) != nil {
		t.Fatalf("reply %q is not JSON", m.Data)
	}
	return r
}

func appendReq(t *testing.T, nc *nats.Conn, req map[string]any) reply {
	t.Helper()
	return request(t, nc, logstore.SubjectAppend, req)
}

func ev(typ string, kv ...any) map[string]any {
	e := map[string]any{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i].(string)] = kv[i+1]
	}
	return e
}

func created() map[string]any {
	return ev(schema.TypeSessionCreated, "data", map[string]any{"title": "t"})
}

func events(es ...map[string]any) []map[string]any { return es }

// mustOK appends and fails the test unless the writer committed.
func mustOK(t *testing.T, nc *nats.Conn, req map[string]any) writer.AppendReply {
	t.Helper()
	r := appendReq(t, nc, req)
	if r.err != nil {
		t.Fatalf("append %v: %s: %s", req, r.err.Code, r.err.Message)
	}
	return r.ok
}

// streamMsgs counts the messages of the session streams (SESSIONS or its
// partitions), read on the test's connection.
func streamMsgs(t *testing.T, nc *nats.Conn) uint64 {
	t.Helper()
	var n uint64
	for _, name := range natstest.StreamNames(t, nc) {
		if name != logstore.StreamName && !strings.HasPrefix(name, logstore.StreamName+"-") {
			continue
		}
		s, err := natstest.JetStream(t, nc).Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += info.State.Msgs
	}
	return n
}

// stored decodes every stored message of the session, judged or not (a
// session being erased lacks its first events; checkContiguous judges).
func stored(t *testing.T, st *logstore.Store, sid string) []logstore.Event {
	t.Helper()
	var evs []logstore.Event
	_, err := st.ReadSession(context.Background(), sid, 0, func(m *logstore.Msg) error {
		e, err := schema.Decode(m.Data)
		evs = append(evs, logstore.Event{Envelope: e, StreamSeq: m.StreamSeq})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// checkContiguous checks seqs 1..n, once each.
func checkContiguous(evs []logstore.Event) error {
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			return fmt.Errorf("event %d has seq %d", i, e.Seq)
		}
	}
	return nil
}

var errNotYet = errors.New("not yet")

func writerConfig() writer.Config { return writer.Config{} }

// counterSum adds every series of a counter (or gauge) family.
func counterSum(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func startWriterB(b *testing.B, st *logstore.Store, conn *nats.Conn) *writer.Service {
	b.Helper()
	w, err := writer.New(writer.Config{Store: st, Conn: conn})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(b, 5*time.Second, 10*time.Millisecond, w.Ready)
	return w
}
