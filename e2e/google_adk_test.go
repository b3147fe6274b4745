package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

const adkDir = "../clients/google-adk"

// TestGoogleADKSessionSequence runs one sequence of SessionService calls
// (Node, clients/google-adk/test/sequence.mjs) against the ADK's own
// InMemorySessionService and against SessionlogSessionService: three
// sessions of two users, events with unicode, a function call and its
// response, a thought, a partial event (not stored), an event replaced by
// its id, state deltas with temp:, app: and user: keys, a response of
// 2.5 MB (over the server's 1 MB max_payload), 1,000 events in one
// session, getSession with numRecentEvents and afterTimestamp, listSessions
// paged and ordered, deleteSession. Every answer is deep-equal as JSON, and
// so is a new service's read on another connection. The stored sessions
// fold under sessionlog's rules with the mapped messages and calls; the
// deleted one is erased.
func TestGoogleADKSessionSequence(t *testing.T) {
	nodePath := testbin.Node(t, adkDir, "dist/index.js")
	s := imStart(t)
	out := testbin.RunNode(t, nodePath, adkDir, nil, "test/sequence.mjs", s.url, "shop")
	var rep struct {
		Calls, Events int
		Mismatches    []json.RawMessage
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	t.Logf("report: %s", out)
	if len(rep.Mismatches) > 0 || rep.Calls < 1000 || rep.Events != 1009 {
		t.Fatalf("report: %s", out)
	}

	_, listing, _ := s.run(t, "ls")
	count := map[string]int{}
	var sessions int
	for _, line := range strings.Split(listing, "\n") {
		id, _, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(id, "adk-s") {
			continue
		}
		sessions++
		st := session.New(id)
		for _, e := range s.events(t, id) {
			if err := st.Apply(&e); err != nil {
				t.Fatalf("%s: event %d (%s) does not fold: %v", id, e.Seq, e.Type, err)
			}
			count[e.Type]++
		}
	}
	// ann/s1, ann/s2, cid/s9 (bob/s1 is erased): 503 prompts and 504
	// replies (an event replaced by its id is a reply twice: history), one
	// call with its result (the 2.5 MB response answers no call: verbatim
	// only).
	want := map[string]int{schema.TypeMessageUser: 503, schema.TypeMessageAssistant: 504, schema.TypeToolRequested: 1, schema.TypeToolResult: 1}
	for typ, n := range want {
		if count[typ] != n {
			t.Errorf("%d %s events, want %d (all: %v)", count[typ], typ, n, count)
		}
	}
	if sessions != 3 {
		t.Fatalf("%d ADK sessions stored, want 3:\n%s", sessions, listing)
	}
}

// TestGoogleADKRunnerResume: the ADK's own Runner with a scripted model
// (a BaseLlm; no network) runs a turn with a tool call on a
// SessionlogSessionService (test/runner.mjs first); the process is killed
// with SIGKILL; a new process finds the same events and state (temp: keys
// never stored, the user: scope kept), and the runner gives the model that
// history followed by the new prompt.
func TestGoogleADKRunnerResume(t *testing.T) {
	nodePath := testbin.Node(t, adkDir, "dist/index.js")
	s := imStart(t)
	line := firstLineThenKill(t, nodePath, adkDir, "test/runner.mjs", s.url, "run-1", "first")
	var first struct {
		Events []any
		State  map[string]any
		Final  string
	}
	if err := json.Unmarshal(line, &first); err != nil {
		t.Fatalf("first run: %s: %v", line, err)
	}
	wantState := map[string]any{"plan": "basic", "user:city": "Zürich", "turns": "What is the weather in Zürich? ☀️"}
	if len(first.Events) != 4 || first.Final != "It is sunny in Zürich." || !reflect.DeepEqual(first.State, wantState) {
		t.Fatalf("first run: %s", line)
	}

	out := testbin.RunNode(t, nodePath, adkDir, nil, "test/runner.mjs", s.url, "run-1", "resume")
	var res struct {
		Before struct {
			Events []any
			State  map[string]any
		}
		Seen  []any
		After struct {
			Events int
			State  map[string]any
		}
		Final string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("resume: %s: %v", out, err)
	}
	if !reflect.DeepEqual(res.Before.Events, first.Events) || !reflect.DeepEqual(res.Before.State, first.State) {
		t.Fatalf("the new process finds\n%v\nthe first stored\n%s", res.Before, line)
	}
	// The model is given each stored event's content, then the prompt.
	var contents []any
	for _, e := range first.Events {
		contents = append(contents, e.(map[string]any)["content"])
	}
	contents = append(contents, map[string]any{"role": "user", "parts": []any{map[string]any{"text": "And tomorrow?"}}})
	if !reflect.DeepEqual(res.Seen, contents) {
		t.Fatalf("the model was given\n%v\nwant\n%v", res.Seen, contents)
	}
	if res.After.Events != 8 || res.Final != "It is rainy in Zürich." || res.After.State["turns"] != "And tomorrow?" {
		t.Fatalf("resumed run: %s", out)
	}
}

// TestGoogleADKConcurrentAppends: two processes append 40 events each to
// one ADK session at once (test/concurrent.mjs); both read the same
// events in the same order, every event once, each writer's in the order
// it appended them, and the state has both writers' last deltas.
func TestGoogleADKConcurrentAppends(t *testing.T) {
	nodePath := testbin.Node(t, adkDir, "dist/index.js")
	s := imStart(t)
	outs := runAtOnce(t, nodePath, adkDir,
		[]string{"test/concurrent.mjs", s.url, "race-1", "A", "40", "80"},
		[]string{"test/concurrent.mjs", s.url, "race-1", "B", "40", "80"})
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("the two readers differ:\n%s\n%s", outs[0], outs[1])
	}
	var got struct {
		Texts []string
		State map[string]any
	}
	if err := json.Unmarshal(outs[0], &got); err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for i, text := range got.Texts {
		var w string
		var k int
		if _, err := fmt.Sscanf(text, "%s %d", &w, &k); err != nil || k != next[w] {
			t.Fatalf("event %d is %q, want %s %d", i, text, w, next[w])
		}
		next[w]++
	}
	if next["A"] != 40 || next["B"] != 40 || got.State["last-A"] != 39.0 || got.State["last-B"] != 39.0 {
		t.Fatalf("events %v, state %v", next, got.State)
	}
}

// TestGoogleADKSessionSurvivesRestart: a process appends 60 events one at
// a time (test/restart.mjs) while `sessionlog up` is killed with SIGKILL
// after the 20th and started again on the same data and port: every
// appendEvent returns, and the session holds each event once, in order,
// with the last state delta.
func TestGoogleADKSessionSurvivesRestart(t *testing.T) {
	nodePath := testbin.Node(t, adkDir, "dist/index.js")
	last := killUpUnder(t, nodePath, adkDir, "test/restart.mjs", "restart-1", "60")
	var got struct {
		Texts []string
		State map[string]any
	}
	if err := json.Unmarshal(last, &got); err != nil {
		t.Fatalf("last line %q: %v", last, err)
	}
	if len(got.Texts) != 60 || got.State["k"] != 59.0 {
		t.Fatalf("after the restart: %s", last)
	}
	for k, text := range got.Texts {
		if text != fmt.Sprintf("event %d", k) {
			t.Fatalf("event %d is %q: %s", k, text, last)
		}
	}
}

// TestGoogleADKAgentUser: against `sessionlog up` with the deployment's
// agent user (test/agent.mjs), SessionlogSessionService creates, appends,
// reads and lists with the agent's rights alone; deleteSession (erase) is
// refused as forbidden and removes nothing. What an agent can do today:
// another process with the same agent user that names the app, user and
// session reads the session with its state and appends to it (the agent
// user is one identity; per-agent isolation is an open issue).
func TestGoogleADKAgentUser(t *testing.T) {
	nodePath := testbin.Node(t, adkDir, "dist/index.js")
	up, out, rep := runAsAgent(t, nodePath, adkDir, "test/agent.mjs")
	want := map[string]any{
		"own": 1.0, "listed": 1.0,
		"otherRead": 1.0, "otherState": map[string]any{"secret": "plan", "user:tier": "gold", "app:open": true}, "otherAppendSeen": 2.0,
		"deleteRefused": "forbidden", "afterDelete": 2.0,
	}
	if !reflect.DeepEqual(rep, want) {
		t.Fatalf("agent report %s, want %v", out, want)
	}
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if code, body, _ := httpGet(up.HTTPURL + "/v1/sessions"); code != 200 || !strings.Contains(body, `"adk-private-1-`) {
			return fmt.Errorf("the dashboard's list: %d %.300s", code, body)
		}
		return nil
	})
}
