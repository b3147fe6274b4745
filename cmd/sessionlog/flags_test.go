package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/bytesize"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/internal/version"
)

func TestParseFlagsEnv(t *testing.T) {
	env := map[string]string{
		"SESSIONLOG_NATS_URL":  "nats://env:4222",
		"SESSIONLOG_LEASE_TTL": "7s",
		"SESSIONLOG_LOG_LEVEL": "debug",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	t.Run("EnvFillsUnsetFlags", func(t *testing.T) {
		fs := newFlags("x")
		nf := addNATSFlags(fs)
		ttl := fs.Duration("lease-ttl", time.Second, "")
		if err := parseFlagsEnv(fs, nil, lookup); err != nil {
			t.Fatal(err)
		}
		if nf.URL != "nats://env:4222" || *ttl != 7*time.Second || fs.Lookup("log-level").Value.String() != "debug" {
			t.Fatalf("got url %q ttl %v", nf.URL, *ttl)
		}
	})
	t.Run("CommandLineWins", func(t *testing.T) {
		fs := newFlags("x")
		nf := addNATSFlags(fs)
		if err := parseFlagsEnv(fs, []string{"--nats-url", "nats://flag:1"}, lookup); err != nil {
			t.Fatal(err)
		}
		if nf.URL != "nats://flag:1" {
			t.Fatalf("got %q", nf.URL)
		}
	})
	t.Run("FlagsAfterPositional", func(t *testing.T) {
		fs := newFlags("x")
		nf := addNATSFlags(fs)
		if err := parseFlagsEnv(fs, []string{"s-1", "--nats-url", "nats://flag:1", "s-2", "--", "--not-a-flag"}, lookup); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(fs.Args(), " "); got != "s-1 s-2 --not-a-flag" || nf.URL != "nats://flag:1" {
			t.Fatalf("args %q url %q", got, nf.URL)
		}
	})
	t.Run("ErrBadEnvValue", func(t *testing.T) {
		fs := newFlags("x")
		fs.Duration("lease-ttl", time.Second, "")
		err := parseFlagsEnv(fs, nil, func(k string) (string, bool) {
			if k == "SESSIONLOG_LEASE_TTL" {
				return "soon", true
			}
			return "", false
		})
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "SESSIONLOG_LEASE_TTL") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("EnvName", func(t *testing.T) {
		if got := envName("nats-url"); got != "SESSIONLOG_NATS_URL" {
			t.Fatal(got)
		}
	})
}

func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"help"}, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, n := range commandNames() {
		if !strings.Contains(out.String(), "  "+n+" ") {
			t.Errorf("help lacks %s:\n%s", n, out.String())
		}
	}
	for _, must := range []string{"up", "writer", "ls", "show", "replay", "tail", "verify", "export", "import", "bench"} {
		if _, ok := commands[must]; !ok {
			t.Errorf("command %s not registered", must)
		}
	}
	if code := Main(context.Background(), []string{"no-such"}, &out, &out); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
	if code := Main(context.Background(), []string{"ls", "--no-such-flag"}, &out, &out); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
}

// A service started with --replicas 1 keeps an existing stream's replicas.
func TestOpenStoreKeepsReplicas(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if _, err := openStore(ctx, nc, logstore.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(ctx, nc, logstore.Config{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Replicas; got != 3 {
		t.Fatalf("stream has %d replicas after a --replicas 1 start, want 3", got)
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lss"}, `Did you mean ls?`},
		{[]string{"shwo"}, `Did you mean show?`},
		{[]string{"help", "nonexist"}, `unknown command "nonexist"`},
		{[]string{"help", "verfy"}, `Did you mean verify?`},
	} {
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, errOut.String(), tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if code := Main(context.Background(), args, &out, &out); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, out.String())
		}
		if !strings.HasPrefix(out.String(), "sessionlog "+version.Release) {
			t.Errorf("%v printed %q, want it to start with the release %s", args, out.String(), version.Release)
		}
	}
}

// TestBadFlagSaysItOnce: a misspelt flag is one line naming the nearest
// flag, not the error twice around the whole usage.
func TestBadFlagSaysItOnce(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"ls", "--jsn"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	got := errOut.String()
	if strings.Count(got, "-jsn") != 1 || !strings.Contains(got, "did you mean --json?") || strings.Contains(got, "Usage of") {
		t.Fatalf("stderr:\n%s\nwant one line naming -jsn and --json, without the usage", got)
	}
}

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "320MiB": 320 << 20, "256Mi": 256 << 20, "1GiB": 1 << 30,
		"2G": 2 << 30, "500MB": 500e6, "64KiB": 64 << 10, "10B": 10, " 8 MiB ": 8 << 20,
	} {
		var b bytesize.Size
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5GiB", "12 parsecs", "9999999999GiB"} {
		var b bytesize.Size
		if err := b.Set(bad); err == nil {
			t.Errorf("Set(%q) = %d, want an error", bad, b)
		}
	}
	for v, want := range map[int64]string{320 << 20: "320MiB", 1 << 30: "1GiB", 1000: "1000", 0: "0"} {
		b := bytesize.Size(v)
		if got := b.String(); got != want {
			t.Errorf("String(%d) = %q, want %q", v, got, want)
		}
	}
}

// Logs give durations as Go writes them, not as nanoseconds.
func TestLogDurations(t *testing.T) {
	fs := newFlags("x")
	var buf bytes.Buffer
	log, err := newLogger(fs, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("waited", "took", 1500*time.Millisecond)
	if !strings.Contains(buf.String(), `"took":"1.5s"`) {
		t.Fatalf("log line %s: want took 1.5s", buf.String())
	}
}

// The events bar's clock starts when it is made, so the first poll's
// events are not counted as done in no time.
func TestEventsBarRateFromStart(t *testing.T) {
	var out bytes.Buffer
	bar := progress.Events(&out, 100000, "fork")
	time.Sleep(200 * time.Millisecond)
	if err := bar.Set64(1000); err != nil {
		t.Fatal(err)
	}
	s := bar.State()
	if s.SecondsSince < 0.2 {
		t.Fatalf("the bar's clock started %.3f s ago, want it from its making (0.2 s)", s.SecondsSince)
	}
	if rate := float64(s.CurrentNum) / s.SecondsSince; rate > 10000 {
		t.Fatalf("first rate %.0f events/s for 1000 events in 0.2 s", rate)
	}
}

// The inbox prefix of a verb an agent runs: --inbox-prefix or
// SESSIONLOG_INBOX_PREFIX; else _INBOX.<user> with --nats-user, which
// every agent user may subscribe to; else the operators' _SL_OP. A
// prefix nats.go would refuse is a usage error.
func TestInboxPrefix(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"OperatorsWithoutUser", nil, "", "_SL_OP"},
		{"UsersOwn", []string{"--nats-user", "alice"}, "", "_INBOX.alice"},
		{"Flag", []string{"--nats-user", "alice", "--inbox-prefix", "_SL_OP"}, "", "_SL_OP"},
		{"Env", []string{"--nats-user", "alice"}, "_INBOX.alice", "_INBOX.alice"},
		{"FlagOverEnv", []string{"--inbox-prefix", "_INBOX.bob"}, "_INBOX.alice", "_INBOX.bob"},
		{"UserNoToken", []string{"--nats-user", "a b"}, "", "_SL_OP"},
		{"ErrWildcard", []string{"--inbox-prefix", "_INBOX.*"}, "", ""},
		{"ErrTrailingDot", []string{"--inbox-prefix", "_INBOX.alice."}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, nf := sreFlags("ship", &bytes.Buffer{})
			lookup := func(k string) (string, bool) { return tc.env, k == "SESSIONLOG_INBOX_PREFIX" && tc.env != "" }
			if err := parseFlagsEnv(fs, tc.args, lookup); err != nil {
				t.Fatal(err)
			}
			nf.agentInbox()
			err := nf.givenInbox()
			var ue *usageError
			if tc.want == "" {
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--inbox-prefix") {
					t.Fatalf("got %v, want a usage error", err)
				}
				return
			}
			if err != nil || nf.Inbox != tc.want {
				t.Fatalf("got %q %v, want %q", nf.Inbox, err, tc.want)
			}
		})
	}
}
