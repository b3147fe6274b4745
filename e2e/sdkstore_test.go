package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

const sdkStoreDir = "../clients/claude-agent-sdk"

// TestClaudeAgentSDKStoreOnStack: a transcript an agent appends through
// the Claude Agent SDK store (Node, clients/claude-agent-sdk) with a tool
// call left open is a session of the whole stack: the projector's API that
// the dashboard reads lists it; an operator's repair closes the open call
// with outcome_unknown in sessionlog; and the next load gives the agent the
// entries exactly as it appended them (the repair is sessionlog's events,
// not a rewrite of the transcript). delete erases it with its subagent
// transcript.
func TestClaudeAgentSDKStoreOnStack(t *testing.T) {
	nodePath := testbin.Node(t, sdkStoreDir, "dist/index.js")
	s := imStart(t)
	const (
		project = "-home-ann-shop"
		sid     = "77777777-7777-4777-8777-777777777777"
	)
	lines := []string{
		`{"parentUuid":null,"isSidechain":false,"cwd":"/home/ann/shop","sessionId":"` + sid + `","version":"2.0.76","gitBranch":"main","type":"user","message":{"role":"user","content":"deploy the shop"},"uuid":"d-1","timestamp":"2026-12-04T09:00:00.000Z"}`,
		`{"parentUuid":"d-1","isSidechain":false,"cwd":"/home/ann/shop","sessionId":"` + sid + `","version":"2.0.76","gitBranch":"main","type":"assistant","requestId":"req_d","message":{"model":"claude-sonnet-4-5-20250929","id":"msg_d","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_deploy","name":"Bash","input":{"command":"./deploy.sh"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9}},"uuid":"d-2","timestamp":"2026-12-04T09:00:01.000Z"}`,
	}
	file := filepath.Join(t.TempDir(), sid+".jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, l := range lines {
		var v any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	store := func(args ...string) (loaded []any, listed []string) {
		r := storeRun(t, nodePath, nil, s.url, args...)
		return r.Loaded, r.Listed
	}
	loaded, listed := store("append", project, sid, file)
	if !reflect.DeepEqual(loaded, want) || !reflect.DeepEqual(listed, []string{sid}) {
		t.Fatalf("after append: loaded %v, listed %v", loaded, listed)
	}

	// The session the store wrote is the one import maps the file to.
	imp, _, _ := agentlogtest.Read(t, claudecode.Format{}, file)
	id := imp.Sessions[0].Plan.ID
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get(s.http + "/v1/sessions")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), `"`+id+`"`) {
			return fmt.Errorf("the projector does not list %s: %s", id, b)
		}
		return nil
	})

	if code, out, errs := s.run(t, "repair", id, "--force"); code != 0 || !strings.Contains(out, "repaired") {
		t.Fatalf("repair: exit %d\n%s\n%s", code, out, errs)
	}
	var closed bool
	for _, e := range s.events(t, id) {
		if e.Type == schema.TypeToolResult && e.Synthetic && strings.Contains(string(e.Data), schema.ToolOutcomeUnknown) {
			closed = true
		}
	}
	if !closed {
		t.Fatalf("the repair left the open tool call without an outcome_unknown result: %+v", s.events(t, id))
	}
	loaded, _ = store("load", project, sid)
	if !reflect.DeepEqual(loaded, want) {
		t.Fatalf("after the repair the store loads %v, want the appended entries %v", loaded, want)
	}

	// delete is erase (DESIGN.md section 14), of the session and of its
	// subagent transcripts, as the SDK's InMemorySessionStore deletes a
	// main key's subkeys: afterwards each loads null, the project lists
	// nothing, and sessionlog holds none of them.
	const sub = "subagents/agent-d1"
	subFile := filepath.Join(t.TempDir(), "agent-d1.jsonl")
	subLine := `{"parentUuid":null,"isSidechain":true,"agentId":"d1","cwd":"/home/ann/shop","sessionId":"` + sid + `","type":"user","message":{"role":"user","content":"check the deploy"},"uuid":"s-1","timestamp":"2026-12-04T09:00:02.000Z"}`
	if err := os.WriteFile(subFile, []byte(subLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := storeRun(t, nodePath, nil, s.url, "append", project, sid, subFile, sub)
	if len(r.SubLoaded) != 1 || !reflect.DeepEqual(r.Subkeys, []string{sub}) {
		t.Fatalf("the subagent transcript: loaded %v, subkeys %v", r.SubLoaded, r.Subkeys)
	}
	r = storeRun(t, nodePath, nil, s.url, "delete", project, sid, "-", sub)
	if r.Loaded != nil || r.SubLoaded != nil || len(r.Listed) != 0 || len(r.Subkeys) != 0 {
		t.Fatalf("after delete: loaded %v, subagent %v, listed %v, subkeys %v; want nulls and nothing listed", r.Loaded, r.SubLoaded, r.Listed, r.Subkeys)
	}
	for _, path := range []string{"/v1/sessions/" + id, "/v1/sessions/" + id + "-d1"} {
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			resp, err := http.Get(s.http + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"erased"`) {
				return fmt.Errorf("GET %s after delete: %d %s", path, resp.StatusCode, b)
			}
			return nil
		})
	}
	// Deleting again is nothing to do.
	if r := storeRun(t, nodePath, nil, s.url, "delete", project, sid); r.Loaded != nil {
		t.Fatalf("second delete: %+v", r)
	}
}

// storeReport is what test/entries.mjs prints (null loads stay nil).
type storeReport struct {
	Loaded, SubLoaded []any
	Listed, Subkeys   []string
}

// storeRun runs the SDK store's test/entries.mjs (Node) against the stack.
func storeRun(t *testing.T, nodePath string, env []string, url string, args ...string) storeReport {
	t.Helper()
	out := testbin.RunNode(t, nodePath, sdkStoreDir, env, append([]string{"test/entries.mjs", url}, args...)...)
	var rep storeReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	return rep
}

// TestClaudeAgentSDKStoreOnUp: against a running `sessionlog up` whose
// agents hold the agent user's rights, the Claude Agent SDK's own
// importSessionToStore (Node, clients/claude-agent-sdk/test/store.mjs)
// copies two local transcripts, one with a subagent, into the sessionlog
// store twice and once into the SDK's InMemorySessionStore: every key
// loads deep-equal from both, the listings agree, the agent's delete is
// refused (erasure is the operator's), and the sessions show on the
// dashboard's list. The operator's delete erases the session and its
// subagent transcript.
func TestClaudeAgentSDKStoreOnUp(t *testing.T) {
	nodePath := testbin.Node(t, sdkStoreDir, "dist/index.js")
	up := startUp(t, t.TempDir(), nil, "--nats-user", "fleet", "--nats-password", "fleet-pw",
		"--operator-user", "sre", "--operator-password", "sre-pw")
	const (
		project = "-home-ann-shop"
		sid     = "22222222-2222-4222-8222-222222222222"
		sid1    = "11111111-1111-4111-8111-111111111111"
	)
	cfg := t.TempDir()
	if err := os.CopyFS(filepath.Join(cfg, "projects", project), os.DirFS("../pkg/agentlog/claudecode/testdata/projects/"+project)); err != nil {
		t.Fatal(err)
	}
	out := testbin.RunNode(t, nodePath, sdkStoreDir, []string{"CLAUDE_CONFIG_DIR=" + cfg, "NATS_USER=fleet", "NATS_PASS=fleet-pw"},
		"test/store.mjs", up.NATSURL, sid+","+sid1, "/home/ann/shop")
	var rep struct {
		Keys []struct {
			SessionID, Subpath string
			Entries            int
		}
		Mismatches    []json.RawMessage
		NeverWritten  json.RawMessage
		DeleteRefused *string
		Listed        []string
		Subkeys       map[string][]string
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	if len(rep.Keys) != 3 || len(rep.Mismatches) > 0 || string(rep.NeverWritten) != "null" || len(rep.Listed) != 2 || len(rep.Subkeys[sid]) != 1 {
		t.Fatalf("report: %s", out)
	}
	// The agent user may not erase: the store throws the refusal.
	if rep.DeleteRefused == nil || *rep.DeleteRefused != "forbidden" {
		t.Fatalf("the agent's delete: %v, want refused as forbidden: %s", rep.DeleteRefused, out)
	}
	for _, id := range []string{"cc-" + sid, "cc-" + sid1, "cc-" + sid + "-a1b2c3d"} {
		if code, body, err := httpGet(up.HTTPURL + "/v1/sessions/" + id); err != nil || code != 200 {
			t.Fatalf("the dashboard's API on %s: %d %v %s", id, code, err, body)
		}
	}
	if code, body, err := httpGet(up.HTTPURL + "/v1/sessions"); err != nil || code != 200 || !strings.Contains(body, `"cc-`+sid+`"`) {
		t.Fatalf("the dashboard's list: %d %v %s", code, err, body)
	}

	// The operator's delete erases the session and its subagent.
	after := storeRun(t, nodePath, []string{"NATS_USER=sre", "NATS_PASS=sre-pw"}, up.NATSURL, "delete", project, sid, "-", "subagents/agent-a1b2c3d")
	if after.Loaded != nil || after.SubLoaded != nil || len(after.Subkeys) != 0 || len(after.Listed) != 1 || after.Listed[0] != sid1 {
		t.Fatalf("after the operator's delete: %+v", after)
	}
	for _, id := range []string{"cc-" + sid, "cc-" + sid + "-a1b2c3d"} {
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			if code, body, _ := httpGet(up.HTTPURL + "/v1/sessions/" + id); code != 404 || !strings.Contains(body, `"erased"`) {
				return fmt.Errorf("%s after delete: %d %s", id, code, body)
			}
			return nil
		})
	}
}
