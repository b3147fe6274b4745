package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The operator's verbs as processes against three partitions of a 3-node
// R3 cluster, sessions in every partition: ls, show, replay, verify,
// export and locate read every partition, and fork (through a forker
// process) copies a parent into a child in another partition, the two
// led by different nodes. Then one node stops: ls, replay and verify
// still answer from the other two. (TestCLIVerbs runs the same verbs
// through `sessionlog up --partitions 3` on one node; tail, repair and
// verify's problems run on every layout in cmd/sessionlog.)
func TestCLIVerbsP3R3(t *testing.T) {
	l := natstest.Layout{Partitions: 3, Nodes: 3}
	e := fkStartLayout(t, l)
	fkStartForker(t, e.url, e.forkerArgs()...)
	url := []string{"--nats-url", e.url}
	ctx := context.Background()

	// Two sessions in each partition, session i with i+2 events.
	perStream := map[string][]string{}
	events := map[string]int{}
	for i := 0; len(events) < 2*l.Partitions; i++ {
		id := fmt.Sprintf("verb-%d", i)
		loc, _ := e.store.Locate(id)
		if len(perStream[loc.Stream]) == 2 {
			continue
		}
		perStream[loc.Stream] = append(perStream[loc.Stream], id)
		n := len(events) + 2
		evs := []schema.Envelope{{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{"title":"verbs"}`)}}
		for k := 1; k < n; k++ {
			evs = append(evs, schema.Envelope{Type: schema.TypeMessageUser, Data: json.RawMessage(fmt.Sprintf(`{"content":"m%d"}`, k))})
		}
		if _, err := e.cl.Append(ctx, client.AppendRequest{SessionID: id, ExpectedSeq: client.Seq(0), Events: evs}); err != nil {
			t.Fatal(err)
		}
		events[id] = n
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, nil, nil, append(args, url...)...)
		if code != 0 {
			t.Fatalf("sessionlog %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	checkLs := func(want map[string]int) {
		t.Helper()
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(run("ls")), "\n")[1:] {
			f := strings.Fields(line)
			got[f[0]] = f[2]
		}
		if len(got) != len(want) {
			t.Fatalf("ls lists %d sessions, want %d: %v", len(got), len(want), got)
		}
		for id, n := range want {
			if got[id] != fmt.Sprint(n) {
				t.Fatalf("ls: %s at last seq %s, want %d", id, got[id], n)
			}
		}
	}
	total := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}

	checkLs(events)
	for id, n := range events {
		if lines := strings.Split(strings.TrimSpace(run("replay", id)), "\n"); len(lines) != n {
			t.Fatalf("replay %s: %d lines, want %d", id, len(lines), n)
		}
		loc, _ := e.store.Locate(id)
		if out := run("locate", id); !strings.Contains(out, "stream "+loc.Stream+" subject "+loc.Subject) {
			t.Fatalf("locate %s: %q, want %+v", id, out, loc)
		}
	}
	if out := run("show", "verb-0"); !strings.Contains(out, "last seq  2 ") || !strings.Contains(out, "title     verbs") {
		t.Fatalf("show verb-0:\n%s", out)
	}

	// A fork into another partition, led by another node.
	parent := perStream["SESSIONS-0"][1]
	child := "verb-child"
	for loc, _ := e.store.Locate(child); loc.Stream == "SESSIONS-0"; loc, _ = e.store.Locate(child) {
		child += "x"
	}
	if out := strings.TrimSpace(run("fork", parent, "--child", child)); out != child {
		t.Fatalf("fork printed %q, want %q", out, child)
	}
	// The child holds session/created, the parent's events 2..n and
	// fork/committed.
	events[child] = events[parent] + 1
	lines := strings.Split(strings.TrimSpace(run("replay", child)), "\n")
	if len(lines) != events[child] || !strings.Contains(lines[len(lines)-1], `"type":"fork/committed"`) {
		t.Fatalf("replay of the child %s:\n%s", child, strings.Join(lines, "\n"))
	}
	leaders, err := e.store.PartitionLeaders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ploc, _ := e.store.Locate(parent)
	cloc, _ := e.store.Locate(child)
	if leaders[ploc.Stream] == leaders[cloc.Stream] {
		t.Fatalf("parent's %s and child's %s both led by %q", ploc.Stream, cloc.Stream, leaders[ploc.Stream])
	}

	verified := func() {
		t.Helper()
		want := fmt.Sprintf("verified %d sessions, %d events: 0 problems", len(events), total(events))
		if out := run("verify"); !strings.Contains(out, want) {
			t.Fatalf("verify:\n%s\nwant %q", out, want)
		}
	}
	verified()
	exported := strings.Split(strings.TrimSpace(run("export")), "\n")
	if len(exported) != total(events) {
		t.Fatalf("export printed %d events, want %d", len(exported), total(events))
	}
	for _, line := range exported {
		var ev struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || events[ev.SessionID] == 0 {
			t.Fatalf("export line %q: %v", line, err)
		}
	}

	// One node down: every partition keeps a quorum of two, and the
	// verbs read through the nodes left.
	stopped := e.deploy.Cluster.Servers[2]
	stopped.Shutdown()
	stopped.WaitForShutdown()
	// Every stream the verbs read (the partitions, the layout bucket)
	// has a leader among the two left.
	e.deploy.WaitLeaders(e.nc)
	checkLs(events)
	verified()
}
