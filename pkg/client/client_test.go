package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/writer"
)

type stack struct {
	nc *nats.Conn
	st *logstore.Store
	c  *client.Client
}

// newStack connects to url, opens a store and runs a writer on it.
func newStack(t *testing.T, url string, cfg logstore.Config, opts ...client.Option) *stack {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := logstore.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runWriter(t, st, nc)
	return &stack{nc: nc, st: st, c: client.New(nc, opts...)}
}

func runWriter(t *testing.T, st *logstore.Store, nc *nats.Conn) {
	t.Helper()
	w, err := writer.New(writer.Config{Store: st, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, w)
}

// runService runs svc until the test ends and waits until it is ready.
func runService(t *testing.T, svc interface {
	Run(context.Context) error
	Ready() error
}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, svc.Ready)
}

func msg(content string) schema.Envelope {
	return schema.Envelope{Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"` + content + `"}`)}
}

func created() schema.Envelope {
	return schema.Envelope{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)}
}

func storedEvents(t *testing.T, st *logstore.Store, sid string) []logstore.Event {
	t.Helper()
	evs, _, err := st.ReadEvents(context.Background(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// The outcomes of Append: committed with the ids the client chose; typed
// refusals matched by their sentinels; not_committed when no writer
// listens (nothing can have been sent to one).
func TestAppendOutcomes(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	res, err := s.c.Append(ctx, client.AppendRequest{SessionID: "s1", ExpectedSeq: client.Seq(0), Events: []schema.Envelope{created(), msg("hi")}})
	if err != nil || res.FirstSeq != 1 || res.LastSeq != 2 || res.Duplicate || len(res.EventIDs) != 2 || res.Attempts != 1 {
		t.Fatalf("append: %+v, %v", res, err)
	}
	evs := storedEvents(t, s.st, "s1")
	if evs[0].EventID != res.EventIDs[0] || evs[1].EventID != res.EventIDs[1] {
		t.Fatalf("stored ids %s %s, client chose %v", evs[0].EventID, evs[1].EventID, res.EventIDs)
	}
	_, err = s.c.Append(ctx, client.AppendRequest{SessionID: "s1", ExpectedSeq: client.Seq(1), Events: []schema.Envelope{msg("x")}})
	var ce *client.Error
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ce) || ce.CurrentSeq != 2 || errors.Is(err, client.ErrPaused) {
		t.Fatalf("conflict: %#v", err)
	}
	for _, tc := range []struct {
		req  client.AppendRequest
		want error
	}{
		{client.AppendRequest{SessionID: "a.b", Events: []schema.Envelope{msg("x")}}, client.ErrBadRequest},
		{client.AppendRequest{SessionID: "s1", Events: []schema.Envelope{{Type: "x/y"}}}, client.ErrUnknownType},
		{client.AppendRequest{SessionID: "s1", Events: []schema.Envelope{{Type: schema.TypeToolStarted}}}, client.ErrInvalidEvent},
		{client.AppendRequest{SessionID: "s1", Events: []schema.Envelope{{Type: schema.TypeTurnEnded, TurnID: "t9", Data: json.RawMessage(`{"reason":"completed"}`)}}}, client.ErrStructure},
	} {
		if _, err := s.c.Append(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.req.Events, err, tc.want)
		}
	}
	// No writer on this server: nothing was received, so not committed
	// (and not retried as unknown).
	other := natstest.RunServer(t)
	nc := natstest.Connect(t, other)
	res, err = client.New(nc).Append(ctx, client.AppendRequest{SessionID: "s1", Events: []schema.Envelope{msg("x")}})
	if !errors.Is(err, client.ErrNotCommitted) || errors.Is(err, client.ErrOutcomeUnknown) || res.Attempts != 1 {
		t.Fatalf("no writer: %+v %v", res, err)
	}
	if n := len(storedEvents(t, s.st, "s1")); n != 2 {
		t.Fatalf("%d events stored", n)
	}
}

// A lost acknowledgement followed by the client's own retry. The writer's
// store holds JetStream's answer back (then throws it away, as a lost
// reply) until the client gave up waiting and sent the same request
// again: the retry must come out committed (duplicate of the first
// attempt), the events stored once. On a single node and on an R3 stream
// of a 3-node cluster, which answer the writer's re-send differently.
func TestLostAckClientRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
	}{{"R1", 1}, {"R3", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			var url string
			if tc.nodes == 1 {
				url = natstest.RunServer(t).ClientURL()
			} else {
				c := natstest.RunCluster(t, 3)
				url = c.URLs()
			}
			// Count the current case's append requests as they reach the
			// server (the spy's own delivery of an earlier case's request
			// can come after that case ended: only the marker counts).
			spy, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			defer spy.Close()
			var requests atomic.Int32
			var marker atomic.Pointer[[]byte]
			sub, err := spy.Subscribe(logstore.SubjectAppend, func(m *nats.Msg) {
				if mk := marker.Load(); mk != nil && bytes.Contains(m.Data, *mk) {
					requests.Add(1)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := spy.Flush(); err != nil {
				t.Fatal(err)
			}
			var hold atomic.Bool
			release := make(chan struct{})
			s := newStack(t, url, logstore.Config{Replicas: tc.nodes, FaultHook: func(st logstore.FaultStage) error {
				if st != logstore.FaultAck || !hold.CompareAndSwap(true, false) {
					return nil
				}
				<-release
				return errors.New("injected: ack lost")
			}}, client.WithTimeout(500*time.Millisecond), client.WithBackoff(10*time.Millisecond))
			ctx := context.Background()
			if _, err := s.c.Append(ctx, client.AppendRequest{SessionID: "s", ExpectedSeq: client.Seq(0), Events: []schema.Envelope{created()}}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name     string
				expected *uint64
				events   []schema.Envelope
			}{
				{"ExpectedSeq/One", client.Seq(1), []schema.Envelope{msg("a")}},
				{"ExpectedSeq/Batch", client.Seq(2), []schema.Envelope{msg("b1"), msg("b2"), msg("b3")}},
				{"Tail/One", nil, []schema.Envelope{msg("c")}},
				{"Tail/Batch", nil, []schema.Envelope{msg("d1"), msg("d2")}},
			} {
				before := len(storedEvents(t, s.st, "s"))
				mk := []byte(c.events[0].Data)
				marker.Store(&mk)
				requests.Store(0)
				hold.Store(true)
				go func() {
					// Hold the first answer until the client's retry arrived.
					natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
						if requests.Load() < 2 {
							return errors.New("no retry yet")
						}
						return nil
					})
					release <- struct{}{}
				}()
				res, err := s.c.Append(ctx, client.AppendRequest{SessionID: "s", ExpectedSeq: c.expected, Events: c.events})
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if res.Attempts < 2 || !res.Duplicate {
					t.Fatalf("%s: %+v: want a retry answered as duplicate", c.name, res)
				}
				evs := storedEvents(t, s.st, "s")
				if len(evs) != before+len(c.events) {
					t.Fatalf("%s: %d events stored, want %d", c.name, len(evs), before+len(c.events))
				}
				for i, id := range res.EventIDs {
					if e := evs[res.FirstSeq-1+uint64(i)]; e.EventID != id {
						t.Fatalf("%s: seq %d holds %s, want %s", c.name, e.Seq, e.EventID, id)
					}
				}
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	for _, c := range schema.Codes {
		e := &client.Error{Code: c, Message: "m", Index: -1}
		n := 0
		for _, s := range []error{client.ErrBadRequest, client.ErrInvalidEvent, client.ErrUnknownType, client.ErrStructure, client.ErrConflict,
			client.ErrPaused, client.ErrClosed, client.ErrForking, client.ErrTooLarge, client.ErrNotCommitted, client.ErrOutcomeUnknown,
			client.ErrNotFound, client.ErrUnsafeCut, client.ErrUnreadable, client.ErrErased, client.ErrInternal, client.ErrRolledBack,
			client.ErrForbidden, client.ErrQuotaExceeded} {
			if errors.Is(e, s) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("code %s matches %d sentinels, want 1", c, n)
		}
	}
}

// A prepared append is one request however often it is sent: encoded once
// with its ids and times fixed, its second send is a duplicate of the
// first, and a batch prepared after it (expecting the first's last seq)
// follows it. The expectation is fixed when it is prepared: sent out of
// order, the later batch is refused as a conflict and stores nothing.
func TestPreparedAppendSentTwiceIsOneAppend(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	first, err := s.c.PrepareAppend(client.AppendRequest{SessionID: "p1", ExpectedSeq: client.Seq(0), Events: []schema.Envelope{created(), msg("a")}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.c.PrepareAppend(client.AppendRequest{SessionID: "p1", ExpectedSeq: client.Seq(2), Events: []schema.Envelope{msg("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.SendAppend(ctx, second); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("the second batch sent first: %v, want conflict", err)
	}
	r1, err := s.c.SendAppend(ctx, first)
	if err != nil || r1.Duplicate || r1.LastSeq != 2 {
		t.Fatalf("first send: %+v %v", r1, err)
	}
	again, err := s.c.SendAppend(ctx, first)
	if err != nil || !again.Duplicate || again.LastSeq != 2 || again.EventIDs[1] != r1.EventIDs[1] {
		t.Fatalf("second send of the same prepared append: %+v %v, want a duplicate of %+v", again, err, r1)
	}
	r2, err := s.c.SendAppend(ctx, second)
	if err != nil || r2.FirstSeq != 3 {
		t.Fatalf("the batch after it: %+v %v", r2, err)
	}
	evs := storedEvents(t, s.st, "p1")
	if len(evs) != 3 || evs[0].EventID != r1.EventIDs[0] || evs[2].EventID != r2.EventIDs[0] {
		t.Fatalf("stored %+v", evs)
	}
	if _, err := s.c.PrepareAppend(client.AppendRequest{SessionID: "p1", Events: []schema.Envelope{{Type: schema.TypeMessageUser, Data: json.RawMessage(`{`)}}}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("an event that cannot be encoded: %v, want bad_request", err)
	}
}

// Fork's outcomes: the reply, waited for while ctx lasts whatever the
// client's request timeout; the same fork again answered alike; a child
// id chosen when none is given; a refusal as an *Error with its code and,
// for unsafe_cut, the nearest safe seqs; not_committed naming the forker
// when none listens.
func TestForkOutcomes(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	fk, err := forker.New(forker.Config{Store: s.st, Conn: s.nc})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, fk)

	bg := context.Background()
	if _, err := s.c.Append(bg, client.AppendRequest{SessionID: "p", ExpectedSeq: client.Seq(0), Events: []schema.Envelope{
		created(), msg("one"),
		{Type: schema.TypeTurnStarted, TurnID: "t1"},
		{Type: schema.TypeAttemptStarted, TurnID: "t1", AttemptID: "a1"},
		{Type: schema.TypeMessageAssistant, TurnID: "t1", AttemptID: "a1", Data: json.RawMessage(`{"content":"two"}`)},
		{Type: schema.TypeTurnEnded, TurnID: "t1", Data: json.RawMessage(`{"reason":"completed"}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	// A request timeout no append could meet: Fork does not use it.
	c := client.New(s.nc, client.WithTimeout(time.Nanosecond))
	r, err := c.Fork(bg, api.ForkRequest{ParentID: "p", ChildID: "c1"})
	if err != nil || r.ChildID != "c1" || r.ParentID != "p" || r.SeedLength != 6 {
		t.Fatalf("fork: %+v %v", r, err)
	}
	if again, err := c.Fork(bg, api.ForkRequest{ParentID: "p", ChildID: "c1"}); err != nil || again != r {
		t.Fatalf("the same fork again: %+v %v, want %+v", again, err, r)
	}
	if r, err := c.Fork(bg, api.ForkRequest{ParentID: "p"}); err != nil || len(r.ChildID) != 26 || r.SeedLength != 6 {
		t.Fatalf("fork with no child id: %+v %v", r, err)
	}
	_, err = c.Fork(bg, api.ForkRequest{ParentID: "p", ChildID: "c2", At: &api.ForkAt{Seq: client.Seq(4)}})
	var ce *client.Error
	if !errors.Is(err, client.ErrUnsafeCut) || !errors.As(err, &ce) || ce.NearestSafeBefore == nil || *ce.NearestSafeBefore != 2 ||
		ce.NearestSafeAfter == nil || *ce.NearestSafeAfter != 6 {
		t.Fatalf("unsafe cut: %#v", err)
	}
	if _, err := c.Fork(bg, api.ForkRequest{ParentID: "p", ChildID: "c1", At: &api.ForkAt{Seq: client.Seq(2)}}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a different fork into a taken child id: %v", err)
	}

	other := natstest.RunServer(t)
	_, err = client.New(natstest.Connect(t, other)).Fork(bg, api.ForkRequest{ParentID: "p", ChildID: "c3"})
	if !errors.Is(err, client.ErrNotCommitted) || !strings.Contains(err.Error(), "no forker is listening on "+api.SubjectFork) {
		t.Fatalf("no forker: %v", err)
	}
}
