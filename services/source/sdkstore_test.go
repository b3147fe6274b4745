package source_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
)

const sdkDir = "../../clients/claude-agent-sdk"

// TestClaudeAgentSDKStore runs the Claude Agent SDK's own
// importSessionToStore (Node, clients/claude-agent-sdk/test/store.mjs)
// into the sessionlog store and into the SDK's InMemorySessionStore: a
// transcript with a subagent and one without, each imported twice into sessionlog. Every key
// loads deep-equal from both; listSessions, listSubkeys and the SDK's own
// listSessions({ sessionStore }) agree, and listSessionSummaries' SDK data
// is deep-equal; the stored main session has the events import --from
// claude-code gives the file.
func TestClaudeAgentSDKStore(t *testing.T) {
	e := newEnv(t, envOpts{})
	runSDKStore(t, e.srv.ClientURL(), e.st, "")
}

// TestClaudeAgentSDKStoreAsTenantAgent is TestClaudeAgentSDKStore with
// the store connected as alice, an agent of tenant acme, under the
// deployment's accounts: the same answers, its sessions stored as acme's.
func TestClaudeAgentSDKStoreAsTenantAgent(t *testing.T) {
	e := newTenantEnv(t)
	runSDKStore(t, e.srv.ClientURL(), e.st, "_Tacme_", "NATS_USER=alice", "NATS_PASS=pw-alice", "NATS_INBOX=_INBOX.alice")
}

// runSDKStore runs test/store.mjs against the server at url with env
// (the user it connects as) and checks its report; the main session is
// stored under storedPrefix.
func runSDKStore(t *testing.T, url string, st *logstore.Store, storedPrefix string, env ...string) {
	t.Helper()
	nodePath := testbin.Node(t, sdkDir, "dist/index.js")
	const id = "22222222-2222-4222-8222-222222222222"
	cfg := t.TempDir()
	if err := os.CopyFS(filepath.Join(cfg, "projects", "-home-ann-shop"), os.DirFS(ccDir)); err != nil {
		t.Fatal(err)
	}
	// A third transcript larger than a NATS message (3 MB in entries of
	// 100 KB, as long tool outputs make them): the store sends it in
	// several requests and loads it a page at a time.
	big := bigTranscript(t, filepath.Join(cfg, "projects", "-home-ann-shop"))
	out := testbin.RunNode(t, nodePath, sdkDir, append([]string{"CLAUDE_CONFIG_DIR=" + cfg}, env...), "test/store.mjs", url, id+","+sid1+","+big, "/home/ann/shop")
	var rep struct {
		Keys []struct {
			ProjectKey, SessionID, Subpath string
			Entries                        int
		}
		Mismatches    []json.RawMessage
		NeverWritten  json.RawMessage
		DeleteRefused *string
		Listed        []string
		Summaries     int
		Subkeys       map[string][]string
		SDKListed     int `json:"sdkListed"`
		OtherProject  []json.RawMessage
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	t.Logf("report: %s", out)
	if len(rep.Keys) < 2 || len(rep.Mismatches) > 0 || string(rep.NeverWritten) != "null" || rep.DeleteRefused == nil || *rep.DeleteRefused == "" {
		t.Fatalf("report: %s", out)
	}
	if len(rep.Listed) != 3 || rep.Listed[0] != sid1 || rep.Listed[1] != id || rep.Listed[2] != big || rep.Summaries != 3 || rep.SDKListed != 3 ||
		len(rep.Subkeys[id]) != 1 || len(rep.Subkeys[sid1]) != 0 || rep.OtherProject == nil || len(rep.OtherProject) != 0 {
		t.Fatalf("listing: %s", out)
	}
	for _, k := range rep.Keys {
		if k.Subpath == "" && k.SessionID != big && k.Entries != len(agentlogtest.CompleteLines(t, ccDir+k.SessionID+".jsonl")) {
			t.Fatalf("main transcript %s: %d entries", k.SessionID, k.Entries)
		}
	}
	imp, _, _ := agentlogtest.Read(t, claudecode.Format{}, ccDir+id+".jsonl")
	got := stored(t, st, storedPrefix+imp.Sessions[0].Plan.ID)
	want := imp.Sessions[0].Events
	if len(got) != len(want) {
		t.Fatalf("%d events stored, import gives %d", len(got), len(want))
	}
	for i := range want {
		if got[i].EventID != want[i].EventID {
			t.Fatalf("event %d: %s, import gives %s", i+1, got[i].EventID, want[i].EventID)
		}
	}
}

// The real Claude Code transcripts (pkg/agentlog/testdata/real/cc), sent
// by the SDK's importSessionToStore in appends of a few entries each, as a
// growing file is mirrored: no append is refused, and every key loads
// deep-equal to the SDK's InMemorySessionStore.
func TestClaudeAgentSDKStoreRealTranscripts(t *testing.T) {
	nodePath := testbin.Node(t, sdkDir, "dist/index.js")
	e := newEnv(t, envOpts{})
	const real = "../../pkg/agentlog/testdata/real/cc"
	cfg := t.TempDir()
	proj := filepath.Join(cfg, "projects", "-home-marco-projects-spotter")
	if err := os.CopyFS(proj, os.DirFS(real)); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(real)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range names {
		if id, ok := strings.CutSuffix(n.Name(), ".jsonl"); ok {
			ids = append(ids, id)
		}
	}
	for _, batch := range []string{"1", "7"} {
		out := testbin.RunNode(t, nodePath, sdkDir, []string{"CLAUDE_CONFIG_DIR=" + cfg}, "test/store-real.mjs", e.srv.ClientURL(),
			strings.Join(ids, ","), "/home/marco/projects/spotter", batch)
		var rep struct {
			Keys       []json.RawMessage
			Mismatches []json.RawMessage
			Errors     []json.RawMessage
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("report %s: %v", out, err)
		}
		if len(rep.Keys) < len(ids) || len(rep.Mismatches) > 0 || len(rep.Errors) > 0 {
			t.Fatalf("batches of %s entries: %s", batch, out)
		}
	}
}

// bigTranscript writes a Claude Code transcript of 3 MB (30 turns, each
// a prompt and a reply of 50 KB) into dir and returns its session id.
func bigTranscript(t *testing.T, dir string) string {
	t.Helper()
	const sid = "66666666-6666-4666-8666-666666666666"
	var b strings.Builder
	parent := any(nil)
	for i := range 30 {
		u, a := fmt.Sprintf("big-u%02d", i), fmt.Sprintf("big-a%02d", i)
		for _, line := range []map[string]any{
			{"parentUuid": parent, "isSidechain": false, "cwd": "/home/ann/shop", "sessionId": sid, "version": "2.0.76", "type": "user",
				"message": map[string]any{"role": "user", "content": fmt.Sprintf("step %d: %s", i, strings.Repeat("<log line> & more\n", 50<<10/19))},
				"uuid":    u, "timestamp": "2026-12-04T10:00:00.000Z"},
			{"parentUuid": u, "isSidechain": false, "cwd": "/home/ann/shop", "sessionId": sid, "version": "2.0.76", "type": "assistant", "requestId": "req_" + a,
				"message": map[string]any{"model": "claude-sonnet-4-5-20250929", "id": "msg_" + a, "type": "message", "role": "assistant",
					"content": []any{map[string]any{"type": "text", "text": strings.Repeat("ok ", 50<<10/3)}}, "stop_reason": "end_turn", "stop_sequence": nil,
					"usage": map[string]any{"input_tokens": 5, "output_tokens": 9}},
				"uuid": a, "timestamp": "2026-12-04T10:00:01.000Z"},
		} {
			j, err := json.Marshal(line)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
			b.WriteByte('\n')
		}
		parent = a
	}
	if err := os.WriteFile(filepath.Join(dir, sid+".jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return sid
}
