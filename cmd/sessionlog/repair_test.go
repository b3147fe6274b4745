package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/repairer"
)

// `sessionlog repair <id> [--force]` against a running repairer; on one
// stream and on three partitions, on one node and on an R3 cluster.
func TestRepairVerb(t *testing.T) { natstest.ForEachLayout(t, testRepairVerb) }

func testRepairVerb(t *testing.T, l natstest.Layout) {
	d, nc, st := layoutStore(t, l)
	ctx := context.Background()
	svc, err := repairer.New(repairer.Config{Store: st, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, svc.Ready)

	var evs []schema.Envelope
	for i, l := range []string{`{"type":"session/created"}`, `{"type":"turn/started","turnId":"t1"}`,
		`{"type":"tool/requested","turnId":"t1","toolCallId":"c1","data":{"name":"sh","input":{}}}`} {
		var e schema.Envelope
		_ = json.Unmarshal([]byte(l), &e)
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID, e.Time = 1, "s-cli", uint64(i+1), "e"+string(rune('1'+i)), time.Now().UTC()
		evs = append(evs, e)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "s-cli", Events: evs}); err != nil {
		t.Fatal(err)
	}
	if err := st.RenewLease(ctx, "s-cli", "agent-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"repair"}, append(args, "--nats-url", d.URL)...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, stderr := run("s-cli"); code != 1 || !strings.Contains(stderr, "conflict") {
		t.Fatalf("live lease without --force: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run("a.b"); code != 2 {
		t.Fatalf("bad id: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := run("s-cli", "--force")
	if code != 0 || !strings.Contains(stdout, "repaired, seqs 4..7") || !strings.Contains(stdout, "tool_requested c1") {
		t.Fatalf("--force: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, _ := run("s-cli", "--force", "--json"); code != 0 || !strings.Contains(stdout, `"repaired":false`) {
		t.Fatalf("again: exit %d, stdout %q", code, stdout)
	}
	if code, _, stderr := run("nope"); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Fatalf("unknown session: exit %d, stderr %q", code, stderr)
	}
}
