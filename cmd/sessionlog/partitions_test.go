package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// Every service command started with another --partitions than the store
// recorded refuses at once, naming both numbers, and creates nothing.
func TestServiceRefusesOtherPartitions(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	if _, err := logstore.Open(ctx, nc, logstore.Config{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	before := natstest.StreamNames(t, nc)
	for _, svc := range []string{"writer", "repairer", "forker", "projector"} {
		args := []string{svc, "--nats-url", s.ClientURL(), "--partitions", "3", "--http-listen", "127.0.0.1:0"}
		if svc == "projector" {
			args = append(args, "--data-dir", t.TempDir())
		}
		var out, errb bytes.Buffer
		code := Main(ctx, args, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "holds 1 partition") || !strings.Contains(errb.String(), "--partitions 3") {
			t.Fatalf("%s --partitions 3 on a store of 1: exit %d, %q", svc, code, errb.String())
		}
	}
	if after := natstest.StreamNames(t, nc); !slices.Equal(before, after) {
		t.Fatalf("refused starts created streams: %v -> %v", before, after)
	}
}

// `sessionlog locate` prints a session's stream and subject by the count
// the store recorded.
func TestLocateVerb(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := st.Locate("agent-7")
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"locate", "agent-7", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := out.String(); !strings.Contains(got, "stream "+want.Stream+" subject "+want.Subject) || !strings.HasPrefix(want.Stream, "SESSIONS-") {
		t.Fatalf("locate printed %q, want %+v", got, want)
	}
	if code := Main(ctx, []string{"locate", "a.b", "--nats-url", s.ClientURL()}, &out, &errb); code != 2 {
		t.Fatalf("locate of a bad id: exit %d", code)
	}
}

// The service user's permissions list every partition stream a store may
// have.
func TestMaxPartitionsPermitted(t *testing.T) {
	if logstore.MaxPartitions != natsauth.MaxPartitions {
		t.Fatalf("logstore allows %d partitions, the service permissions list %d", logstore.MaxPartitions, natsauth.MaxPartitions)
	}
}
