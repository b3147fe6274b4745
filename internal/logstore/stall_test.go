package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/netproxy"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// stalledLink is a store that reaches a server holding a long session
// ("long", 3000 events) through a pausable link: pausing the link loses
// every reply, as a paused or crashed node loses those of the requests it
// had.
type stalledLink struct {
	st    *logstore.Store // over the link
	proxy *netproxy.Proxy
}

func newStalledLink(t *testing.T, requestTimeout time.Duration) *stalledLink {
	t.Helper()
	srv := natstest.RunServer(t)
	st := open(t, natstest.Connect(t, srv), logstore.Config{})
	if _, err := gen.Seed(context.Background(), st, "long", 3000, 1000); err != nil {
		t.Fatal(err)
	}
	nc, p := natstest.ConnectThrough(t, srv)
	return &stalledLink{st: open(t, nc, logstore.Config{RequestTimeout: requestTimeout}), proxy: p}
}

// readPausing reads the session over the link with a fork's deadline (half
// an hour), pausing the link at its 10th event and calling resume, if
// any, then. It returns the read's error and whether the events came in
// order, once each; t fails if the read is still waiting after a few
// minutes (far past its bound, while the deadline is far off).
func (l *stalledLink) readPausing(t *testing.T, sid string, n uint64, resume func()) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	type result struct {
		got uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		var got uint64
		_, err := l.st.ReadSession(ctx, sid, 0, func(m *logstore.Msg) error {
			if m.StreamSeq != got+1 {
				return fmt.Errorf("stream seq %d after %d", m.StreamSeq, got)
			}
			if got++; got == 10 {
				l.proxy.Pause()
				if resume != nil {
					resume()
				}
			}
			return nil
		})
		if err == nil && got != n {
			err = fmt.Errorf("read %d of %d events", got, n)
		}
		done <- result{got, err}
	}()
	select {
	case r := <-done:
		return r.err
	case <-time.After(3 * time.Minute):
		t.Fatal("the read is still waiting for replies lost with the link")
		return nil
	}
}

// A read whose consumer stops delivering (its replies lost) ends with
// ErrReadStalled after a bounded wait, not at the caller's deadline: a
// fork's read used to hold its slot for the fork's half hour.
func TestReadStalledGivesUp(t *testing.T) {
	l := newStalledLink(t, 300*time.Millisecond)
	err := l.readPausing(t, "long", 3000, nil)
	if !errors.Is(err, logstore.ErrReadStalled) {
		t.Fatalf("read with the link paused: %v, want ErrReadStalled", err)
	}
	l.proxy.Resume()
}

// A stall the cluster recovers from is retried from the last event read:
// the link comes back after the first stall (2 request timeouts), while
// the second try waits for its consumer, so the third (a new consumer
// from where the read got to) gets the rest: every event once, in order.
func TestReadStalledResumes(t *testing.T) {
	l := newStalledLink(t, 2*time.Second)
	resume := func() { time.AfterFunc(5*time.Second, l.proxy.Resume) }
	if err := l.readPausing(t, "long", 3000, resume); err != nil {
		t.Fatalf("read across a short pause: %v", err)
	}
}

// readErasedUnder reads the long session ("long", 3000 events) with a
// store whose stall bound is short, erasing it with erase at the read's
// 10th event, as the eraser's fast way goes (its erasure record, then a
// purge of its subject): the read has more than a thousand events still
// to come when they go. It returns the read's error; t fails if the read
// is still waiting after a few minutes.
func readErasedUnder(t *testing.T, erase func(st *logstore.Store, purge func())) error {
	t.Helper()
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if _, err := gen.Seed(ctx, st, "long", 3000, 1000); err != nil {
		t.Fatal(err)
	}
	loc, err := logstore.Locate("long")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	purge := func() {
		s, err := js.Stream(ctx, loc.Stream)
		if err == nil {
			err = s.Purge(ctx, jetstream.WithPurgeSubject(loc.Subject))
		}
		if err != nil {
			t.Error(err)
		}
	}
	reader := open(t, nc, logstore.Config{RequestTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		var got uint64
		_, err := reader.ReadSession(ctx, "long", 0, func(m *logstore.Msg) error {
			if got++; got == 10 {
				erase(st, purge)
			}
			return nil
		})
		if err == nil {
			err = fmt.Errorf("the read ended without error after %d of 3000 events", got)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(3 * time.Minute):
		t.Fatal("the read of the erased session is still waiting")
		return nil
	}
}

// A read whose session is erased under it ends with code erased, not
// with ErrReadStalled after three stalls: at its first stall it finds
// the session's erasure record.
func TestReadErasedUnderIt(t *testing.T) {
	err := readErasedUnder(t, func(st *logstore.Store, purge func()) {
		if _, _, err := st.MarkErased(context.Background(), logstore.Erasure{SessionID: "long", By: "test", Reason: "test"}); err != nil {
			t.Error(err)
		}
		purge()
	})
	if schema.CodeOf(err) != schema.CodeErased || errors.Is(err, logstore.ErrReadStalled) {
		t.Fatalf("read of a session erased under it: %v, want code erased", err)
	}
}

// Events gone without an erasure record (a purge around the eraser) are
// no erase: the read goes on waiting as before and ends stalled.
func TestReadPurgedUnderItStalls(t *testing.T) {
	err := readErasedUnder(t, func(_ *logstore.Store, purge func()) { purge() })
	if !errors.Is(err, logstore.ErrReadStalled) || schema.CodeOf(err) == schema.CodeErased {
		t.Fatalf("read of a session purged under it: %v, want ErrReadStalled", err)
	}
}
