package repairer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

const (
	testTTL   = time.Second
	testGrace = 300 * time.Millisecond
)

type env struct {
	t     *testing.T
	nc    *nats.Conn
	store *logstore.Store
	url   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	st, err := logstore.Open(context.Background(), nc, logstore.Config{LeaseTTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, nc: nc, store: st, url: s.ClientURL()}
}

type running struct {
	svc    *Service
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func (e *env) start(cfg Config) *running {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Store, cfg.Registerer = e.store, reg
	if cfg.Logger == nil && testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	svc, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	e.t.Cleanup(r.stop)
	natstest.CheckFor(e.t, 10*time.Second, 10*time.Millisecond, svc.Ready)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // idempotent for Cleanup
}

// appendEvents stores agent events after the session's tail, as the
// writer would.
func (e *env) appendEvents(id string, lines ...string) logstore.AppendResult {
	e.t.Helper()
	res, err := e.tryAppend(id, lines...)
	if err != nil {
		e.t.Fatalf("append %s: %v", id, err)
	}
	return res
}

var evCounter sync.Map

func (e *env) tryAppend(id string, lines ...string) (logstore.AppendResult, error) {
	ctx := context.Background()
	tail, err := e.store.Tail(ctx, id)
	if err != nil {
		return logstore.AppendResult{}, err
	}
	evs := make([]schema.Envelope, len(lines))
	for i, l := range lines {
		var ev schema.Envelope
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			e.t.Fatalf("event %q: %v", l, err)
		}
		n, _ := evCounter.LoadOrStore(id, new(int))
		*(n.(*int))++
		ev.SchemaVersion, ev.SessionID, ev.Seq = schema.Version, id, tail.Seq+1+uint64(i)
		ev.EventID = fmt.Sprintf("ev-%d-%d", tail.Seq+1+uint64(i), time.Now().UnixNano())
		ev.Time = time.Now().UTC()
		evs[i] = ev
	}
	return e.store.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: evs})
}

func (e *env) claim(id, holder string) {
	e.t.Helper()
	if err := e.store.RenewLease(context.Background(), id, holder, time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) fold(id string) *session.State {
	e.t.Helper()
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	st := session.New(id)
	for i := range evs {
		if err := st.Apply(&evs[i].Envelope); err != nil {
			e.t.Fatalf("%s: seq %d %s does not fold: %v", id, evs[i].Seq, evs[i].Type, err)
		}
	}
	return st
}

func (e *env) repairs(id string) int {
	e.t.Helper()
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == schema.TypeRepairApplied {
			n++
		}
	}
	return n
}

const (
	evCreated   = `{"type":"session/created"}`
	evTurn      = `{"type":"turn/started","turnId":"t1"}`
	evRequested = `{"type":"tool/requested","turnId":"t1","toolCallId":"c1","data":{"name":"sh","input":{}}}`
	evStarted   = `{"type":"tool/started","turnId":"t1","toolCallId":"c1"}`
)

func TestLeaseExpiryRepairsWithinTTLPlusGrace(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{Grace: testGrace})
	e.appendEvents("s-1", evCreated, evTurn, evRequested, evStarted)
	claimed := time.Now()
	e.claim("s-1", "agent-1")
	natstest.CheckFor(t, testTTL+testGrace+time.Second, 20*time.Millisecond, func() error {
		if !e.fold("s-1").Paused {
			return fmt.Errorf("not repaired yet")
		}
		return nil
	})
	took := time.Since(claimed)
	if took < testTTL+testGrace {
		t.Fatalf("repaired %v after the last renewal: before TTL %v + grace %v", took, testTTL, testGrace)
	}
	st := e.fold("s-1")
	if st.HasOpenWork() || st.Tools["c1"].Status != schema.ToolOutcomeUnknown || st.Repairs != 1 {
		t.Fatalf("after repair: open %v, c1 %s, repairs %d", st.OpenWork(), st.Tools["c1"].Status, st.Repairs)
	}
	if got := counter(t, r.svc.m.repaired.WithLabelValues(string(triggerExpiry))); got != 1 {
		t.Fatalf("repaired metric %v", got)
	}
	if got := counter(t, r.svc.m.closers.WithLabelValues(string(session.OpenToolStarted))); got != 1 {
		t.Fatalf("closers metric %v", got)
	}
	if c, _ := e.store.GetClaim(context.Background(), "s-1"); c != nil {
		t.Fatalf("claim kept after repair: %+v", c)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
