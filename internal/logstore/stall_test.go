package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/netproxy"
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
