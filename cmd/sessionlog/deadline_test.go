package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// hangingService takes requests on subjects and never answers: a service
// that hangs.
func hangingService(t *testing.T, nc *nats.Conn, subjects ...string) <-chan *nats.Msg {
	t.Helper()
	got := make(chan *nats.Msg, 16)
	for _, s := range subjects {
		if _, err := nc.ChanSubscribe(s, got); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every verb that waits gives up at its --timeout, saying so.
func TestVerbTimeout(t *testing.T) {
	s := natstest.RunServer(t)
	hangingService(t, natstest.Connect(t, s), "sessions.api.fork", "sessions.api.repair")
	for _, args := range [][]string{
		{"fork", "s-1", "--progress", "never"},
		{"repair", "s-1"},
	} {
		var out, errb bytes.Buffer
		start := time.Now()
		code := Main(context.Background(), append(args, "--nats-url", s.ClientURL(), "--timeout", "300ms"), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "no result within 300ms (--timeout)") {
			t.Fatalf("%s: exit %d, stderr %q", args[0], code, errb.String())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s took %v with --timeout 300ms", args[0], d)
		}
	}
}

// A verb whose server dies mid-request ends once the connection has been
// down for natsconn.LostAfter, not at its (long) default timeout: `sessionlog
// fork` used to wait its 30 minutes.
func TestVerbServerDies(t *testing.T) {
	s := natstest.RunServer(t)
	got := hangingService(t, natstest.Connect(t, s), "sessions.api.fork")
	done := make(chan struct{})
	var code int
	var errb bytes.Buffer
	start := time.Now()
	go func() {
		defer close(done)
		code = Main(context.Background(), []string{"fork", "s-1", "--progress", "never", "--nats-url", s.ClientURL()}, &bytes.Buffer{}, &errb)
	}()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the fork request never arrived")
	}
	s.Shutdown()
	select {
	case <-done:
	case <-time.After(natsconn.LostAfter + 10*time.Second):
		t.Fatalf("fork still waiting %v after the server died", time.Since(start))
	}
	if code != 1 || !strings.Contains(errb.String(), "lost the connection to NATS") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	t.Logf("fork gave up %v after the server died", time.Since(start).Round(100*time.Millisecond))
}
