package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A follower waits out JetStream being unavailable and returns anything
// else (the projector's table, moved here: it waits by Unreachable).
func TestFollowWaitsOnUnreachable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008}), true},
		{context.DeadlineExceeded, true},
		{nats.ErrTimeout, true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrNoStreamResponse, true},
		{&jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10025}, false},
		{errors.New("nats: authorization violation"), false},
	} {
		if got := logstore.Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func consumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(context.Background(), logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// Next reads the stream in order from after a stream seq, saying how much
// is pending; a subject filter reads one session; Close deletes the
// consumer on the server.
func TestFollowNext(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	for _, sid := range []string{"a", "b"} {
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, 3, sid)}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := st.Follow(ctx, logstore.FollowSpec{Stream: logstore.StreamName, StartAfter: 2, PageEvents: 2})
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(3); want <= 6; want++ {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.StreamSeq != want || m.Pending != 6-want {
			t.Fatalf("got stream seq %d pending %d, want %d pending %d", m.StreamSeq, m.Pending, want, 6-want)
		}
	}
	// Nothing more: Next waits until its context ends.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := f.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past the end: %v", err)
	}
	cancel()
	// A Next that ran out of time leaves the follower as it was: the
	// projector bounds how long it holds a partial chunk this way.
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "a", ExpectedStreamSeq: 3, Events: events("a", 4, 1, "a")}); err != nil {
		t.Fatal(err)
	}
	if m, err := f.Next(ctx); err != nil || m.StreamSeq != 7 || m.Pending != 0 {
		t.Fatalf("Next after a deadline: %+v %v, want stream seq 7", m, err)
	}
	f.Close()
	if _, err := f.Next(ctx); !errors.Is(err, logstore.ErrFollowerClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	loc, _ := logstore.Locate("b")
	g, err := st.Follow(ctx, logstore.FollowSpec{Stream: loc.Stream, Subject: loc.Subject})
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(4); want <= 6; want++ {
		m, err := g.Next(ctx)
		if err != nil || m.StreamSeq != want || m.Subject != loc.Subject {
			t.Fatalf("b: %+v %v, want stream seq %d", m, err, want)
		}
	}
	g.Close()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := consumers(t, js); n != 0 {
			return fmt.Errorf("%d consumers left after Close", n)
		}
		return nil
	})
}

// Fetch pulls a page at a time: at most PageEvents, the next page only
// when asked; new messages come to a page that waits; OnlyNew starts at
// the end.
func TestFollowFetch(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "p", Events: events("p", 1, 5, "p")}); err != nil {
		t.Fatal(err)
	}
	newOnly, err := st.Follow(ctx, logstore.FollowSpec{Stream: logstore.StreamName, OnlyNew: true})
	if err != nil {
		t.Fatal(err)
	}
	defer newOnly.Close()
	f, err := st.Follow(ctx, logstore.FollowSpec{Stream: logstore.StreamName, PageEvents: 2, PageBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []uint64
	for range 3 {
		p, err := f.Fetch(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range p.Messages() {
			got = append(got, m.StreamSeq)
			n++
		}
		if n > 2 || p.Err() != nil {
			t.Fatalf("page of %d messages (at most 2), err %v", n, p.Err())
		}
	}
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("pages gave %v", got)
	}
	// A page waiting for what comes next gets it.
	p, err := f.Fetch(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "p", ExpectedStreamSeq: 5, Events: events("p", 6, 1, "p")}); err != nil {
		t.Fatal(err)
	}
	for m := range p.Messages() {
		if m.StreamSeq != 6 {
			t.Fatalf("waiting page got stream seq %d, want 6", m.StreamSeq)
		}
		break
	}
	m, err := newOnly.Next(ctx)
	if err != nil || m.StreamSeq != 6 {
		t.Fatalf("OnlyNew: %+v %v, want stream seq 6", m, err)
	}
}

// Follow returns at once an error that waiting does not cure.
func TestFollowNotUnavailable(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	called := false
	_, err := st.Follow(context.Background(), logstore.FollowSpec{Stream: "NO_SUCH_STREAM", OnUnavailable: func(error) { called = true }})
	if err == nil || called || logstore.Unreachable(err) {
		t.Fatalf("Follow of a missing stream: %v (waited: %v)", err, called)
	}
}

// With two nodes of three down a stream has no quorum, and every ask of it
// is answered "temporarily unavailable" or not at all: Follow with
// OnUnavailable, and WhileUnreachable with a hook, call it with that
// answer before waiting, and once the nodes are back return what was
// asked (one retry loop serves both).
func TestWaitOutNoQuorum(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, c.Servers[0], nats.MaxReconnects(-1))
	st := open(t, nc, logstore.Config{Replicas: 3})
	// No deadline: Follow asks with none of its own, so that each ask is
	// bounded by the store's request timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.WaitStreamLeader(logstore.StreamName)
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "q", Events: events("q", 1, 1, "q")}); err != nil {
		t.Fatal(err)
	}
	c.WaitStreamsCurrent(logstore.StreamName)
	for _, i := range []int{1, 2} {
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
	}
	// The leader left alone steps down once it misses its followers.
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if _, err := st.LastHeldSeq(ctx, logstore.StreamName); err == nil || !logstore.Unreachable(err) {
			return fmt.Errorf("the last message held, without a quorum: %v, want an unreachable log", err)
		}
		return nil
	})
	type answer struct {
		who string
		err error
	}
	waited, done := make(chan answer, 2), make(chan answer, 2)
	hook := func(who string) func(error) {
		var once sync.Once
		return func(err error) { once.Do(func() { waited <- answer{who, err} }) }
	}
	var fol *logstore.Follower
	go func() {
		f, err := st.Follow(ctx, logstore.FollowSpec{Stream: logstore.StreamName, OnUnavailable: hook("Follow")})
		fol = f
		done <- answer{"Follow", err}
	}()
	var held uint64
	go func() {
		h, err := logstore.WhileUnreachable(ctx, time.Second, hook("WhileUnreachable"), func(ctx context.Context) (uint64, error) {
			return st.LastHeldSeq(ctx, logstore.StreamName)
		})
		held = h
		done <- answer{"WhileUnreachable", err}
	}()
	for range 2 {
		select {
		case w := <-waited:
			if !logstore.Unreachable(w.err) {
				t.Errorf("%s waited on %v, not an unreachable log", w.who, w.err)
			}
		case d := <-done:
			t.Fatalf("%s returned without a quorum before waiting: %v", d.who, d.err)
		}
	}
	for _, i := range []int{1, 2} {
		c.Restart(i)
	}
	for range 2 {
		if d := <-done; d.err != nil {
			t.Fatalf("%s once the quorum is back: %v", d.who, d.err)
		}
	}
	if held != 1 {
		t.Errorf("WhileUnreachable: last message held %d, want 1", held)
	}
	defer fol.Close()
	if m, err := fol.Next(ctx); err != nil || m.StreamSeq != 1 {
		t.Fatalf("the follower's first message: %+v %v, want stream seq 1", m, err)
	}
}

// Live delivers one session's transient events, or every session's.
func TestLive(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	var mu sync.Mutex
	var one, all []string
	s1, err := st.Live("s1", 1<<20, func(m logstore.LiveMsg) {
		mu.Lock()
		defer mu.Unlock()
		one = append(one, m.SessionID+"="+string(m.Data)+"/"+m.Header.Get("SL-After-Seq"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := st.Live("", 0, func(m logstore.LiveMsg) {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, m.SessionID)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := st.Live("bad.id", 0, func(logstore.LiveMsg) {}); err == nil {
		t.Fatal("Live of a bad session id: no error")
	}
	m := nats.NewMsg("sessions.live.s1")
	m.Data = []byte(`{"afterSeq":1}`)
	m.Header.Set("SL-After-Seq", "1")
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("sessions.live.s2", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(one) != `[s1={"afterSeq":1}/1]` || fmt.Sprint(all) != "[s1 s2]" {
			return fmt.Errorf("one %v all %v", one, all)
		}
		return nil
	})
	if s1.Dropped() != 0 {
		t.Fatalf("dropped %d", s1.Dropped())
	}
}
