package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// Every service command started with another --partitions than the store
// recorded refuses at once, naming both numbers, and creates nothing: a
// store of one partition started with --partitions 3, and a store of three
// started without the flag (its default is 1).
func TestServiceRefusesOtherPartitions(t *testing.T) {
	for _, tc := range []struct {
		recorded int
		flag     []string
		want     []string
	}{
		{1, []string{"--partitions", "3"}, []string{"holds 1 partition", "--partitions 3"}},
		{3, nil, []string{"holds 3 partition", "--partitions 1"}},
	} {
		t.Run(fmt.Sprintf("P%d", tc.recorded), func(t *testing.T) {
			s := natstest.RunServer(t)
			nc := natstest.Connect(t, s)
			ctx := context.Background()
			if _, err := logstore.Open(ctx, nc, logstore.Config{Partitions: tc.recorded}); err != nil {
				t.Fatal(err)
			}
			before := natstest.StreamNames(t, nc)
			// A service that did start runs until this ends, and fails
			// the test by its exit code.
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for _, svc := range []string{"writer", "repairer", "forker", "projector"} {
				args := append([]string{svc, "--nats-url", s.ClientURL(), "--http-listen", "127.0.0.1:0"}, tc.flag...)
				if svc == "projector" {
					args = append(args, "--data-dir", t.TempDir())
				}
				var out, errb bytes.Buffer
				code := Main(ctx, args, &out, &errb)
				if code != 1 || !containsAll(errb.String(), tc.want...) {
					t.Fatalf("%s %v on a store of %d: exit %d, %q", svc, tc.flag, tc.recorded, code, errb.String())
				}
			}
			if after := natstest.StreamNames(t, nc); !slices.Equal(before, after) {
				t.Fatalf("refused starts created streams: %v -> %v", before, after)
			}
		})
	}
}

// `sessionlog up --partitions 3` on a data directory whose store holds one
// partition refuses, naming both numbers, and leaves the store as it was.
func TestUpRefusesOtherPartitions(t *testing.T) {
	dir := t.TempDir()
	// The store up made on an earlier start: its JetStream directory is
	// <data-dir>/nats.
	streams := func(provision bool) []string {
		s, err := natstest.Start(natstest.Options(filepath.Join(dir, "nats")))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { s.Shutdown(); s.WaitForShutdown() }()
		nc := natstest.Connect(t, s)
		defer nc.Close()
		if provision {
			if _, err := logstore.Open(context.Background(), nc, logstore.Config{Partitions: 1}); err != nil {
				t.Fatal(err)
			}
		}
		return natstest.StreamNames(t, nc)
	}
	before := streams(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"up", "--data-dir", dir, "--partitions", "3",
		"--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, &out, &errb)
	if code != 1 || !containsAll(errb.String(), "holds 1 partition", "--partitions 3") {
		t.Fatalf("up --partitions 3 on a store of 1: exit %d, %q", code, errb.String())
	}
	if after := streams(false); !slices.Equal(before, after) || slices.Contains(after, "SESSIONS-0") {
		t.Fatalf("a refused up changed the store's streams: %v -> %v", before, after)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// `sessionlog locate` prints a session's stream and subject by the count
// the store recorded; a missing session is an error.
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
	// A session that is not there is not found (exit 1), with where it
	// would be.
	if code := Main(ctx, []string{"locate", "agent-7", "--nats-url", s.ClientURL()}, &out, &errb); code != 1 || out.Len() != 0 ||
		!strings.Contains(errb.String(), "session agent-7: not found (it would be stream "+want.Stream+" subject "+want.Subject+")") {
		t.Fatalf("locate of a missing session: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if _, err := gen.Seed(ctx, st, "agent-7", 3, 0); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := Main(ctx, []string{"locate", "agent-7", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := out.String(); !strings.Contains(got, "stream "+want.Stream+" subject "+want.Subject) || !strings.HasPrefix(want.Stream, "SESSIONS-") {
		t.Fatalf("locate printed %q, want %+v", got, want)
	}
	out.Reset()
	if code := Main(ctx, []string{"locate", "--json", "agent-7", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("locate --json: exit %d: %s", code, errb.String())
	}
	var j struct {
		SessionID, Stream, Subject string
		Partition, Partitions      int
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil || j.SessionID != "agent-7" || j.Stream != want.Stream || j.Subject != want.Subject || j.Partitions != 3 {
		t.Fatalf("locate --json printed %s (%v), want %+v", out.String(), err, want)
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
