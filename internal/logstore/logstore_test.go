package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

var events = logstore.EventsForTest

func open(t *testing.T, nc *nats.Conn, cfg logstore.Config) *logstore.Store {
	t.Helper()
	s, err := logstore.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocate(t *testing.T) {
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", string(make([]byte, 129))} {
		if _, err := logstore.Locate(bad); schema.CodeOf(err) != schema.CodeBadRequest {
			t.Errorf("Locate(%q) = %v, want bad_request", bad, err)
		}
	}
	loc, err := logstore.Locate("s-1")
	if err != nil || loc.Subject != "sessions.ev.s-1" || loc.Stream != "SESSIONS" {
		t.Fatalf("Locate = %+v, %v", loc, err)
	}
}

func TestAppendReadConflict(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	// Provisioning twice is idempotent.
	open(t, nc, logstore.Config{})
	ctx := context.Background()

	r, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s1", Events: events("s1", 1, 1, "e")})
	if err != nil || r.FirstSeq != 1 || r.LastSeq != 1 || r.Duplicate {
		t.Fatalf("first append = %+v, %v", r, err)
	}
	r2, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s1", ExpectedStreamSeq: r.StreamSeq, Events: events("s1", 2, 10, "e")})
	if err != nil || r2.LastSeq != 11 {
		t.Fatalf("batch append = %+v, %v", r2, err)
	}
	// Same expectation again with other ids: conflict, with the current seq.
	_, err = st.Append(ctx, logstore.AppendRequest{SessionID: "s1", ExpectedStreamSeq: r.StreamSeq, Events: events("s1", 2, 1, "other")})
	var ce *logstore.ConflictError
	if !errors.As(err, &ce) || ce.Tail.Seq != 11 || !errors.Is(err, logstore.ErrConflict) {
		t.Fatalf("conflict append = %v", err)
	}
	var se *schema.Error
	if !errors.As(err, &se) || se.CurrentSeq == nil || *se.CurrentSeq != 11 {
		t.Fatalf("conflict error lacks currentSeq: %#v", se)
	}
	// A retry of a committed request: duplicate, committed.
	r3, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s1", ExpectedStreamSeq: r.StreamSeq, Events: events("s1", 2, 10, "e")})
	if err != nil || !r3.Duplicate || r3.StreamSeq != r2.StreamSeq {
		t.Fatalf("retry of batch = %+v, %v (want duplicate at %d)", r3, err, r2.StreamSeq)
	}
	r4, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s1", Events: events("s1", 1, 1, "e")})
	if err != nil || !r4.Duplicate {
		t.Fatalf("retry of single = %+v, %v", r4, err)
	}
	evs, tail, err := st.ReadEvents(ctx, "s1", 0)
	if err != nil || len(evs) != 11 || tail.Seq != 11 {
		t.Fatalf("read = %d events, tail %+v, %v", len(evs), tail, err)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	// Too many events, too large.
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s2", Events: events("s2", 1, 1001, "e")}); schema.CodeOf(err) != schema.CodeTooLarge {
		t.Fatalf("1001 events: %v", err)
	}
	big := events("s2", 1, 1, "e")
	big[0].Data = []byte(`{"title":"` + string(make([]byte, 0)) + fmt.Sprintf("%0300000d", 0) + `"}`)
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s2", Events: big}); schema.CodeOf(err) != schema.CodeTooLarge {
		t.Fatalf("large event: %v", err)
	}
	if tail, _ := st.Tail(ctx, "s2"); tail.Exists() {
		t.Fatalf("refused appends stored something: %+v", tail)
	}
}

// A lost acknowledgement is resolved by re-sending with the same ids: a
// single node answers "wrong last sequence", a replicated stream answers
// "duplicate"; both must come out committed, stored once.
func TestLostAckResolved(t *testing.T) {
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
			nc, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			var drop atomic.Int32
			st := open(t, nc, logstore.Config{Replicas: tc.nodes, FaultHook: func(s logstore.FaultStage) error {
				if s == logstore.FaultAck && drop.Add(-1) >= 0 {
					return errors.New("injected: ack lost")
				}
				return nil
			}})
			ctx := context.Background()
			for _, n := range []int{1, 5} {
				sid := fmt.Sprintf("lost-%d", n)
				drop.Store(1)
				r, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, n, "e")})
				if err != nil || r.Duplicate || r.LastSeq != uint64(n) {
					t.Fatalf("%d events: %+v, %v", n, r, err)
				}
				evs, _, err := st.ReadEvents(ctx, sid, 0)
				if err != nil || len(evs) != n {
					t.Fatalf("stored %d events, want %d (%v)", len(evs), n, err)
				}
				// Every ack lost: outcome unknown, still stored once.
				sid2 := sid + "-x"
				drop.Store(100)
				_, err = st.Append(ctx, logstore.AppendRequest{SessionID: sid2, Events: events(sid2, 1, n, "e")})
				// The re-send is answered by the stream ("wrong last sequence"
				// or duplicate) and the read finds the ids: committed.
				if err != nil {
					t.Fatalf("all acks lost: %v", err)
				}
				evs, _, _ = st.ReadEvents(ctx, sid2, 0)
				if len(evs) != n {
					t.Fatalf("stored %d, want %d", len(evs), n)
				}
			}
		})
	}
}

func TestLease(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{LeaseTTL: time.Second})
	ctx := context.Background()
	if err := st.RenewLease(ctx, "s1", "agent-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		time.Sleep(400 * time.Millisecond)
		if err := st.RenewLease(ctx, "s1", "agent-1", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if l, _, err := st.GetLease(ctx, "s1"); err != nil || l == nil || l.Holder != "agent-1" {
		t.Fatalf("renewed lease = %+v, %v", l, err)
	}
	natstest.CheckFor(t, 5*time.Second, 50*time.Millisecond, func() error {
		if l, _, _ := st.GetLease(ctx, "s1"); l != nil {
			return errors.New("lease still live")
		}
		return nil
	})
	if c, err := st.GetClaim(ctx, "s1"); err != nil || c == nil || c.Holder != "agent-1" {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	// A lease can be taken again after it expired.
	if err := st.RenewLease(ctx, "s1", "agent-2", time.Now()); err != nil {
		t.Fatal(err)
	}
}

// A refusal is a conflict only when another event is seen after the
// expected position. A "wrong last sequence" for a send that was stored
// (what a former leader cut off by a partition answers, while the real
// leader stores the same message) comes out committed; an expectation
// after which nothing is stored, with the tail behind it (what a stale
// read shows), is not a conflict but an unknown outcome, and stores
// nothing.
func TestConflictNeedsAnotherEvent(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	var stale atomic.Int32
	st := open(t, nc, logstore.Config{ResolveAttempts: 3, FaultHook: func(s logstore.FaultStage) error {
		if s == logstore.FaultAck && stale.Add(-1) >= 0 {
			return &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 1"}
		}
		return nil
	}})
	ctx := context.Background()
	r, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s", Events: events("s", 1, 1, "e")})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		stale.Store(1)
		r2, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s", ExpectedStreamSeq: r.StreamSeq, Events: events("s", r.LastSeq+1, n, "e")})
		if err != nil || r2.LastSeq != r.LastSeq+uint64(n) {
			t.Fatalf("%d events refused as wrong last sequence though stored: %+v, %v", n, r2, err)
		}
		r = r2
	}
	stale.Store(0)
	_, err = st.Append(ctx, logstore.AppendRequest{SessionID: "s", ExpectedStreamSeq: r.StreamSeq + 10, Events: events("s", r.LastSeq+1, 1, "x")})
	if errors.Is(err, logstore.ErrConflict) || schema.CodeOf(err) != schema.CodeOutcomeUnknown {
		t.Fatalf("expectation past the tail: %v, want outcome_unknown", err)
	}
	if tail, err := st.Tail(ctx, "s"); err != nil || tail.StreamSeq != r.StreamSeq {
		t.Fatalf("tail %+v, %v: want it unchanged at %d", tail, err, r.StreamSeq)
	}
	// Another event after the expected position: a conflict at once.
	_, err = st.Append(ctx, logstore.AppendRequest{SessionID: "s", ExpectedStreamSeq: 1, Events: events("s", 2, 1, "y")})
	if !errors.Is(err, logstore.ErrConflict) {
		t.Fatalf("position taken: %v, want conflict", err)
	}
}

// ReadSessionTo reads a session up to the tail it is given (read before,
// from the leader), not up to the tail when it begins: the events
// appended after that tail are not read. Both ways of reading (leader
// reads for a short session, a consumer for a longer one) stop there.
func TestReadSessionToGivenTail(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	for _, n := range []uint64{4, 12} {
		sid := "s" + string(rune('a'+n))
		r, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, int(n), "e")})
		if err != nil {
			t.Fatal(err)
		}
		tail, err := st.Tail(ctx, sid)
		if err != nil || tail.Seq != n {
			t.Fatalf("tail %+v, %v", tail, err)
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: r.StreamSeq, Events: events(sid, n+1, 3, "e")}); err != nil {
			t.Fatal(err)
		}
		var got []uint64
		to, err := st.ReadSessionTo(ctx, sid, 0, tail, func(m *logstore.Msg) error {
			got = append(got, m.StreamSeq)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(got)) != n || got[len(got)-1] != tail.StreamSeq || to != tail {
			t.Fatalf("%s: read %d messages up to stream seq %v (tail %+v), want the %d up to %+v", sid, len(got), got, to, n, tail)
		}
	}
}
