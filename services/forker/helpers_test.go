package forker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

type env struct {
	t   *testing.T
	srv *server.Server
	nc  *nats.Conn
	cl  *client.Client // sends the fork requests (env.fork)
	st  *logstore.Store
	svc *Service
	ctx context.Context
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	return newEnvLayout(t, natstest.Layout{Partitions: 1, Nodes: 1}, mod)
}

// newEnvLayout is newEnv on the servers of layout l: a store of its
// partitions with a replica on each of its nodes, every stream (the
// forker's bucket too) led and current before the test starts.
func newEnvLayout(t *testing.T, l natstest.Layout, mod func(*Config)) *env {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := logstore.Open(ctx, nc, logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: d.Server, nc: nc, cl: client.New(nc), st: st, ctx: ctx}
	e.svc = e.startForker(mod)
	t.Cleanup(cancel)
	d.WaitLeaders(nc)
	return e
}

// startForker runs a forker service until the test ends.
func (e *env) startForker(mod func(*Config)) *Service {
	e.t.Helper()
	cfg := Config{Store: e.st, Conn: e.nc}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("forker Run: %v", err)
		}
	})
	natstest.CheckFor(e.t, 10*time.Second, 10*time.Millisecond, svc.Ready)
	return svc
}

func (e *env) fork(req Request) (Reply, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	r, err := e.cl.Fork(ctx, req)
	if ce, ok := err.(*client.Error); ok {
		// The refusal as the service made it: the same fields.
		se := &schema.Error{Code: ce.Code, Message: ce.Message, Index: ce.Index,
			NearestSafeBefore: ce.NearestSafeBefore, NearestSafeAfter: ce.NearestSafeAfter}
		if ce.CurrentSeq != 0 {
			se.CurrentSeq = &ce.CurrentSeq
		}
		err = se
	}
	return r, err
}

func (e *env) mustFork(req Request) Reply {
	e.t.Helper()
	r, err := e.fork(req)
	if err != nil {
		e.t.Fatalf("fork %+v: %v", req, err)
	}
	return r
}

func seqp(n uint64) *uint64 { return &n }

// appendLines appends events (folded and validated first, as the writer
// would) to a session after its tail, in one atomic batch.
func (e *env) appendLines(sid string, lines ...string) logstore.AppendResult {
	e.t.Helper()
	evs := make([]schema.Envelope, 0, len(lines))
	for _, l := range lines {
		evs = append(evs, *sessiontest.Event(e.t, l))
	}
	return e.appendEvents(sid, evs)
}

func (e *env) appendEvents(sid string, evs []schema.Envelope) logstore.AppendResult {
	e.t.Helper()
	st := e.state(sid)
	tail, err := e.st.Tail(e.ctx, sid)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range evs {
		x := &evs[i]
		x.SchemaVersion, x.SessionID, x.Seq = schema.Version, sid, st.LastSeq+1
		if x.EventID == "" {
			x.EventID = fmt.Sprintf("e%d", x.Seq)
		}
		if x.Time.IsZero() {
			x.Time = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(x.Seq) * time.Second)
		}
		opt := schema.ValidateOptions{Stored: true}
		if x.Synthetic {
			opt.Origin = schema.OriginService
		}
		if err := schema.Validate(x, opt); err != nil {
			e.t.Fatalf("seq %d %s: %v", x.Seq, x.Type, err)
		}
		if err := st.Apply(x); err != nil {
			e.t.Fatalf("seq %d %s: %v", x.Seq, x.Type, err)
		}
	}
	res, err := e.st.Append(e.ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: tail.StreamSeq, Events: evs})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *env) events(sid string) []logstore.Event {
	e.t.Helper()
	evs, _, err := e.st.ReadEvents(e.ctx, sid, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// state folds a session from the log; every stored event must fold.
func (e *env) state(sid string) *session.State {
	e.t.Helper()
	s := session.New(sid)
	for _, x := range e.events(sid) {
		if err := s.Apply(&x.Envelope); err != nil {
			e.t.Fatalf("%s seq %d does not fold: %v", sid, x.Seq, err)
		}
	}
	return s
}

// checkChild verifies a committed child against its parent: seq 1 names
// the parent, 2..k are synthetic copies with the same seqs, types, ids and
// data and new event ids, k+1 is fork/committed, and the whole child folds.
func (e *env) checkChild(child, parent string, k uint64, depth int) []logstore.Event {
	e.t.Helper()
	cev := e.events(child)
	pev := e.events(parent)
	if uint64(len(cev)) < k+1 {
		e.t.Fatalf("child %s has %d events, want at least %d", child, len(cev), k+1)
	}
	var created schema.SessionCreated
	if err := cev[0].DecodeData(&created); err != nil || cev[0].Type != schema.TypeSessionCreated {
		e.t.Fatalf("child seq 1: %s %v", cev[0].Type, err)
	}
	if p := created.Parent; p == nil || p.SessionID != parent || p.SeedLength != k || p.Depth != depth {
		e.t.Fatalf("child parent = %+v, want {%s %d %d}", created.Parent, parent, k, depth)
	}
	if !cev[0].Synthetic {
		e.t.Fatal("child session/created is not synthetic")
	}
	ids := map[string]bool{}
	for i := uint64(1); i < k; i++ {
		c, p := cev[i], pev[i]
		if c.Seq != p.Seq || c.Type != p.Type || c.TurnID != p.TurnID || c.StepID != p.StepID ||
			c.AttemptID != p.AttemptID || c.ToolCallID != p.ToolCallID || string(c.Data) != string(p.Data) || !c.Time.Equal(p.Time) {
			e.t.Fatalf("child seq %d differs from parent:\n%+v\n%+v", c.Seq, c.Envelope, p.Envelope)
		}
		if !c.Synthetic || c.SessionID != child || c.EventID == p.EventID || !schema.ValidItemID(c.EventID) || ids[c.EventID] {
			e.t.Fatalf("child seq %d: synthetic=%v session=%s id=%s", c.Seq, c.Synthetic, c.SessionID, c.EventID)
		}
		ids[c.EventID] = true
	}
	var fc schema.ForkCommitted
	if c := cev[k]; c.Type != schema.TypeForkCommitted || c.Seq != k+1 || c.DecodeData(&fc) != nil || fc.SeedLength != k {
		e.t.Fatalf("child seq %d: %s %s, want fork/committed seedLength %d", k+1, c.Type, c.Data, k)
	}
	// Copies are written canonical, spliced or encoded.
	if _, err := e.st.ReadSession(e.ctx, child, 0, func(m *logstore.Msg) error {
		if _, canonical, err := schema.DecodeCanonical(m.Data); err != nil || !canonical {
			return fmt.Errorf("child body at stream seq %d is not canonical (%v): %s", m.StreamSeq, err, m.Data)
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	s := e.state(child)
	if s.Forking || s.ForkCommittedSeq != k+1 {
		e.t.Fatalf("child forking=%v committed@%d, want committed@%d", s.Forking, s.ForkCommittedSeq, k+1)
	}
	return cev
}

// snapshot is a session's events with their stream seqs, for "unchanged" checks.
func (e *env) snapshot(sid string) string {
	var b strings.Builder
	for _, x := range e.events(sid) {
		body, _ := schema.Encode(&x.Envelope)
		fmt.Fprintf(&b, "%d %s\n", x.StreamSeq, body)
	}
	return b.String()
}

func (e *env) noChild(child string) {
	e.t.Helper()
	tail, err := e.st.Tail(e.ctx, child)
	if err != nil {
		e.t.Fatal(err)
	}
	if tail.Exists() {
		e.t.Fatalf("child %s was written: tail %+v", child, tail)
	}
	e.noRecord(child)
}

func (e *env) noRecord(child string) {
	e.t.Helper()
	if _, ok, _ := e.svc.bucket().Get(e.ctx, child); ok {
		e.t.Fatalf("a fork record for %s was left behind", child)
	}
}

func wantCode(t *testing.T, err error, code schema.Code) *schema.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	se, ok := err.(*schema.Error)
	if !ok || se.Code != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
	return se
}
