package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/acpagent"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/sessionfixture"
	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/acp"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// conformanceDir holds the ACP SDK the conformance test drives
// (.ci/run installs it with npm ci).
const conformanceDir = "../../clients/acp-conformance"

// node finds Node and the installed SDK, or fails saying how to get them:
// the conformance test is never skipped.
func node(t *testing.T) string {
	t.Helper()
	return testbin.Node(t, conformanceDir, "node_modules/@agentclientprotocol/sdk/package.json")
}

type conformanceReport struct {
	Wire              []json.RawMessage `json:"wire"`
	Invalid           []json.RawMessage `json:"invalid"`
	Handled           int               `json:"handled"`
	Replayed          int               `json:"replayed"`
	InitializeInvalid *string           `json:"initializeInvalid"`
	Initialize        struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession         bool `json:"loadSession"`
			SessionCapabilities struct {
				List *struct{} `json:"list"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	} `json:"initialize"`
	List []struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Title     string `json:"title"`
	} `json:"list"`
	Prompt     refusal `json:"prompt"`
	NewSession refusal `json:"newSession"`
	Missing    refusal `json:"missing"`
}

type refusal struct {
	Refused bool   `json:"refused"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// The protocol's own SDK, as an editor's client, runs `sessionlog acp`
// (the real binary) against a real projector: initialize advertises
// loadSession and list, session/list pages through the fleet newest first,
// session/load replays a session holding every event type with every
// notification valid under the SDK's schema and equal to the mapping of
// each event, tool calls and messages as the session has them;
// session/prompt is refused; events appended after the load arrive live.
func TestACPConformance(t *testing.T) {
	nodePath := node(t)
	bin := testbin.Path(t)
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "acp-fixture"
	events := sessionfixture.Events(id)
	finish := sessionfixture.Finish(id)
	for _, evs := range [][]schema.Envelope{sessionfixture.ParentEvents(), events} {
		if err := sessionfixture.Check(evs); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: evs[0].SessionID, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := assemble.NewProjector(assemble.DefaultProjector(t.TempDir()), st, assemble.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() {
		pcancel()
		if err := <-done; err != nil {
			t.Errorf("projector: %v", err)
		}
	}()
	hs := httptest.NewServer(p.Handler())
	defer hs.Close()
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, p.Ready)

	cmd := exec.CommandContext(ctx, nodePath, "conformance.mjs", bin, hs.URL, id, strconv.Itoa(len(finish)))
	cmd.Dir = conformanceDir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"loaded":true`) {
		cmd.Wait()
		t.Fatalf("the client did not load the session: %q", sc.Text())
	}
	tail, err := st.Tail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: finish}); err != nil {
		t.Fatal(err)
	}
	if !sc.Scan() {
		cmd.Wait()
		t.Fatalf("no report from the client: %v", sc.Err())
	}
	var rep conformanceReport
	if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v: %s", err, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v", err)
	}

	if rep.InitializeInvalid != nil {
		t.Errorf("initialize response invalid: %s", *rep.InitializeInvalid)
	}
	if ini := rep.Initialize; ini.ProtocolVersion != acp.ProtocolVersion || !ini.AgentCapabilities.LoadSession || ini.AgentCapabilities.SessionCapabilities.List == nil {
		t.Errorf("initialize: %+v", ini)
	}
	var ids []string
	for _, s := range rep.List {
		ids = append(ids, s.SessionID)
	}
	if want := []string{id, sessionfixture.ParentID}; !reflect.DeepEqual(ids, want) {
		t.Errorf("session/list (pages of 1, newest first): %v, want %v", ids, want)
	}
	if len(rep.List) > 0 && (rep.List[0].Cwd != "/work/app" || rep.List[0].Title != "Fix the flaky test") {
		t.Errorf("listed %+v", rep.List[0])
	}
	if !rep.Prompt.Refused || rep.Prompt.Code != acpagent.CodeReadOnly || !strings.Contains(rep.Prompt.Message, "read-only") {
		t.Errorf("session/prompt: %+v, want refused with %d read-only", rep.Prompt, acpagent.CodeReadOnly)
	}
	if !rep.NewSession.Refused || rep.NewSession.Code != acpagent.CodeReadOnly {
		t.Errorf("session/new: %+v, want refused with %d", rep.NewSession, acpagent.CodeReadOnly)
	}
	if !rep.Missing.Refused || rep.Missing.Code != acpagent.CodeResourceNotFound || !strings.Contains(rep.Missing.Message, "no-such-session") {
		t.Errorf("session/load of an unknown session: %+v, want %d naming it", rep.Missing, acpagent.CodeResourceNotFound)
	}
	for _, inv := range rep.Invalid {
		t.Errorf("not valid under the SDK's schema: %s", inv)
	}
	if rep.Handled != len(rep.Wire) {
		t.Errorf("the SDK's client took %d of the %d notifications on the wire", rep.Handled, len(rep.Wire))
	}

	// Every notification is the mapping of the session's events, in order:
	// the replay before the load's reply, the appended ones after it.
	all := append(append([]schema.Envelope{}, events...), finish...)
	var want []any
	replayWant := 0
	for i := range all {
		for _, u := range acp.Map(&all[i]) {
			b, _ := json.Marshal(acp.Notify(id, u).Params)
			var v any
			json.Unmarshal(b, &v)
			want = append(want, v)
		}
		if i == len(events)-1 {
			replayWant = len(want)
		}
	}
	if rep.Replayed != replayWant {
		t.Errorf("replayed %d notifications before the load's reply, want %d", rep.Replayed, replayWant)
	}
	var got []any
	for _, w := range rep.Wire {
		var v any
		json.Unmarshal(w, &v)
		got = append(got, v)
	}
	if len(got) != len(want) {
		t.Fatalf("%d notifications, want %d", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("notification %d:\n got %s\nwant %s", i, g, w)
		}
	}
	checkReplayedContent(t, all, rep.Wire)
}

// checkReplayedContent reads the notifications as an editor does and
// compares what they show with the session: each message's text under its
// event id, each tool call's title, input, statuses and output.
func checkReplayedContent(t *testing.T, events []schema.Envelope, wire []json.RawMessage) {
	t.Helper()
	type toolView struct {
		title    string
		statuses []string
		input    string
		output   string
	}
	texts := map[string]string{}
	tools := map[string]*toolView{}
	var plans [][]acp.PlanEntry
	var titles []string
	for _, w := range wire {
		var n struct {
			Update struct {
				SessionUpdate string          `json:"sessionUpdate"`
				MessageID     string          `json:"messageId"`
				Content       json.RawMessage `json:"content"`
				ToolCallID    string          `json:"toolCallId"`
				Title         string          `json:"title"`
				Status        string          `json:"status"`
				RawInput      json.RawMessage `json:"rawInput"`
				RawOutput     json.RawMessage `json:"rawOutput"`
				Entries       []acp.PlanEntry `json:"entries"`
			} `json:"update"`
		}
		json.Unmarshal(w, &n)
		u := n.Update
		switch u.SessionUpdate {
		case acp.UserMessageChunk, acp.AgentMessageChunk:
			var c acp.ContentBlock
			json.Unmarshal(u.Content, &c)
			texts[u.MessageID] += c.Text
		case acp.ToolCall:
			tools[u.ToolCallID] = &toolView{title: u.Title, statuses: []string{u.Status}, input: string(u.RawInput)}
		case acp.ToolCallUpdate:
			tv := tools[u.ToolCallID]
			if tv == nil {
				t.Errorf("tool_call_update of %s before its tool_call", u.ToolCallID)
				continue
			}
			tv.statuses = append(tv.statuses, u.Status)
			if u.RawOutput != nil {
				tv.output = string(u.RawOutput)
			}
		case acp.Plan:
			plans = append(plans, u.Entries)
		case acp.SessionInfoUpdate:
			if u.Title != "" {
				titles = append(titles, u.Title)
			}
		}
	}
	for _, e := range events {
		switch e.Type {
		case schema.TypeMessageUser, schema.TypeMessageAssistant:
			var d schema.Message
			e.DecodeData(&d)
			var want string
			if json.Unmarshal(d.Content, &want) != nil {
				var blocks []struct{ Text string }
				json.Unmarshal(d.Content, &blocks)
				for _, b := range blocks {
					want += b.Text
				}
			}
			if texts[e.EventID] != want {
				t.Errorf("message %s: %q, want %q", e.EventID, texts[e.EventID], want)
			}
		case schema.TypeToolRequested:
			var d schema.ToolRequested
			e.DecodeData(&d)
			tv := tools[e.ToolCallID]
			if tv == nil {
				t.Errorf("tool call %s not replayed", e.ToolCallID)
				continue
			}
			if tv.title != d.Name || !jsonEqual(tv.input, string(d.Input)) {
				t.Errorf("tool call %s: title %q input %s, want %q %s", e.ToolCallID, tv.title, tv.input, d.Name, d.Input)
			}
		}
	}
	wantTools := map[string][]string{
		"call-read":  {"pending", "in_progress", "completed"},
		"call-test":  {"pending", "in_progress", "failed"},
		"call-write": {"pending", "in_progress", "failed"}, // outcome_unknown, repaired
		"call-lint":  {"pending", "failed"},                // not_started, repaired
	}
	for id, want := range wantTools {
		if tv := tools[id]; tv == nil || !reflect.DeepEqual(tv.statuses, want) {
			t.Errorf("tool call %s statuses: %+v, want %v", id, tv, want)
		}
	}
	if tv := tools["call-read"]; tv == nil || tv.output != `"func TestFlaky(t *testing.T) { ... }"` {
		t.Errorf("call-read output: %+v", tv)
	}
	if len(plans) != 2 || plans[0][0].Status != acp.StatusInProgress || plans[1][0].Status != acp.StatusCompleted || len(plans[1]) != 3 {
		t.Errorf("plans: %+v", plans)
	}
	if !reflect.DeepEqual(titles, []string{"Fix the flaky test", "Fix TestFlaky"}) {
		t.Errorf("titles: %v", titles)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
