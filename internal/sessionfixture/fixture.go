// Package sessionfixture builds, for tests of the protocol bridges (ACP,
// OpenTelemetry), a session that holds every event type of DESIGN.md
// section 3 in an order pkg/session accepts: a fork child with a goal,
// a completed turn with tool calls, an approval, a job, a compaction and
// an aborted one, an interrupted attempt, a pause and resume, and a turn
// its agent left open that a repair closed (a tool call outcome_unknown,
// one not_started); Finish closes it.
package sessionfixture

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// ParentID is the session the fixture is forked from (its one event is
// ParentEvents).
const ParentID = "fixture-parent"

// T0 is the time of the fixture's first event; each next one is a second
// later.
var T0 = time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)

type ev struct {
	typ                       string
	turn, step, attempt, tool string
	synthetic, ignorable      bool
	data                      any
}

// ParentEvents is the parent session: just its creation.
func ParentEvents() []schema.Envelope {
	return build(ParentID, T0.Add(-time.Hour), []ev{{typ: schema.TypeSessionCreated, data: map[string]any{"title": "parent"}}})
}

// Events is the fixture session id, every event type in it.
func Events(id string) []schema.Envelope {
	return build(id, T0, []ev{
		{typ: schema.TypeSessionCreated, data: map[string]any{"title": "Fix the flaky test", "agent": "fixture",
			"labels": map[string]string{"cwd": "/work/app"}, "parent": map[string]any{"sessionId": ParentID, "seedLength": 1, "depth": 1}}},
		{typ: schema.TypeForkCommitted, synthetic: true, data: map[string]any{"seedLength": 1}},
		{typ: schema.TypeGoalUpdated, data: map[string]any{"revision": 1, "objective": "Make TestFlaky pass", "acceptance": []string{"go test passes", "no sleep added"}, "status": "active"}},
		{typ: schema.TypeTurnStarted, turn: "t1", data: map[string]any{"input": "fix it"}},
		{typ: schema.TypeMessageUser, turn: "t1", data: map[string]any{"content": "TestFlaky fails one run in ten: please fix it."}},
		{typ: "source/line", ignorable: true, data: map[string]any{"format": "claude-code", "line": map[string]any{"type": "user", "uuid": "u-1"}, "index": 0}},
		{typ: schema.TypeStepStarted, turn: "t1", step: "st1"},
		{typ: schema.TypeAttemptStarted, turn: "t1", attempt: "a1", data: map[string]any{"model": "claude-sonnet-4-5"}},
		{typ: schema.TypeMessageAssistant, turn: "t1", attempt: "a1", data: map[string]any{
			"content": []any{map[string]any{"type": "text", "text": "Let me read the test first."}, map[string]any{"type": "text", "text": "Then run it."}},
			"usage":   map[string]any{"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 300, "context_window": 200000}}},
		{typ: schema.TypeToolRequested, turn: "t1", tool: "call-read", data: map[string]any{"name": "Read", "input": map[string]any{"path": "flaky_test.go"}}},
		{typ: schema.TypeToolStarted, turn: "t1", tool: "call-read"},
		{typ: schema.TypeToolResult, turn: "t1", tool: "call-read", data: map[string]any{"status": "ok", "output": "func TestFlaky(t *testing.T) { ... }"}},
		{typ: schema.TypeToolRequested, turn: "t1", tool: "call-test", data: map[string]any{"name": "Bash", "input": map[string]any{"command": "go test -count=20 ./..."}}},
		{typ: schema.TypeApprovalRequested, turn: "t1", data: map[string]any{"approvalId": "ap1", "toolCallId": "call-test", "prompt": "Run go test?"}},
		{typ: schema.TypeApprovalDecided, turn: "t1", data: map[string]any{"approvalId": "ap1", "decision": "approved", "by": "alice"}},
		{typ: schema.TypeToolStarted, turn: "t1", tool: "call-test"},
		{typ: schema.TypeToolResult, turn: "t1", tool: "call-test", data: map[string]any{"status": "error", "output": "--- FAIL: TestFlaky (0.01s)"}},
		{typ: schema.TypeJobStarted, data: map[string]any{"jobId": "job-1"}},
		{typ: schema.TypeJobEnded, data: map[string]any{"jobId": "job-1", "status": "exited", "exitCode": 0}},
		{typ: schema.TypeCompactionStarted, data: map[string]any{"compactionId": "cp1", "throughSeq": 12}},
		{typ: schema.TypeCompactionEnded, data: map[string]any{"compactionId": "cp1", "summary": "Read the test; it failed under -count=20.", "throughSeq": 12}},
		{typ: schema.TypeCompactionStarted, data: map[string]any{"compactionId": "cp2", "throughSeq": 19}},
		{typ: schema.TypeCompactionAborted, data: map[string]any{"compactionId": "cp2", "reason": "model refused"}},
		{typ: schema.TypeAttemptStarted, turn: "t1", attempt: "a2", data: map[string]any{"model": "claude-sonnet-4-5"}},
		{typ: schema.TypeAttemptInterrupt, turn: "t1", attempt: "a2", data: map[string]any{"reason": "rate_limited"}},
		{typ: schema.TypeAttemptStarted, turn: "t1", attempt: "a3", data: map[string]any{"model": "claude-sonnet-4-5"}},
		{typ: schema.TypeMessageAssistant, turn: "t1", attempt: "a3", data: map[string]any{"content": "The test races on a shared map; fixed with a mutex.",
			"usage": map[string]any{"inputTokens": 900, "outputTokens": 40}}},
		{typ: schema.TypeStepEnded, turn: "t1", step: "st1", data: map[string]any{"reason": "done"}},
		{typ: schema.TypeTurnEnded, turn: "t1", data: map[string]any{"reason": "completed"}},
		{typ: schema.TypeSessionPaused, data: map[string]any{"reason": "review"}},
		{typ: schema.TypeSessionResumed, data: map[string]any{"by": "alice"}},
		{typ: schema.TypeTurnStarted, turn: "t2"},
		{typ: schema.TypeMessageUser, turn: "t2", data: map[string]any{"content": "Now write the fix to disk."}},
		{typ: schema.TypeToolRequested, turn: "t2", tool: "call-write", data: map[string]any{"name": "Write", "input": map[string]any{"path": "flaky.go"}}},
		{typ: schema.TypeToolStarted, turn: "t2", tool: "call-write"},
		{typ: schema.TypeToolRequested, turn: "t2", tool: "call-lint", data: map[string]any{"name": "Bash", "input": map[string]any{"command": "go vet ./..."}}},
		// The agent died here; the repairer closed what it left open.
		{typ: schema.TypeRepairApplied, synthetic: true, data: map[string]any{"reason": "lease expired", "closed": []map[string]string{
			{"kind": "tool", "id": "call-write"}, {"kind": "tool", "id": "call-lint"}, {"kind": "turn", "id": "t2"}}}},
		{typ: schema.TypeToolResult, turn: "t2", tool: "call-write", synthetic: true, data: map[string]any{"status": "outcome_unknown"}},
		{typ: schema.TypeToolResult, turn: "t2", tool: "call-lint", synthetic: true, data: map[string]any{"status": "not_started"}},
		{typ: schema.TypeTurnEnded, turn: "t2", synthetic: true, data: map[string]any{"reason": "interrupted"}},
		{typ: schema.TypeSessionPaused, synthetic: true, data: map[string]any{"reason": "repaired"}},
	})
}

// Finish is what follows Events(id) (a reader following it live): the
// session resumed, its goal done, the session closed.
func Finish(id string) []schema.Envelope {
	evs := build(id, T0.Add(time.Hour), []ev{
		{typ: schema.TypeSessionResumed, data: map[string]any{"by": "bob"}},
		// The write's real result, come after the repair closed the call:
		// the repair's result stands.
		{typ: schema.TypeToolLateResult, ignorable: true, data: map[string]any{"toolCallId": "call-write", "status": "ok", "output": "wrote flaky.go"}},
		{typ: schema.TypeSessionTitled, data: map[string]any{"title": "Fix TestFlaky"}},
		{typ: schema.TypeSessionGranted, data: map[string]any{"grants": []string{"reviewer"}}},
		// The model's context goes back to the first turn's end: the
		// second turn, repaired, is abandoned.
		{typ: schema.TypeContextRewound, data: map[string]any{"toEventId": id + "-e29", "toSeq": 29}},
		{typ: schema.TypeGoalUpdated, data: map[string]any{"revision": 2, "objective": "Make TestFlaky pass", "acceptance": []string{"go test passes", "no sleep added"}, "status": "done"}},
		{typ: schema.TypeSessionClosed, data: map[string]any{"reason": "done"}},
	})
	n := uint64(len(Events(id)))
	for i := range evs {
		evs[i].Seq += n
		evs[i].EventID = fmt.Sprintf("%s-e%02d", id, evs[i].Seq)
	}
	return evs
}

func build(id string, t0 time.Time, evs []ev) []schema.Envelope {
	out := make([]schema.Envelope, 0, len(evs))
	for i, e := range evs {
		data := []byte("{}")
		if e.data != nil {
			data, _ = json.Marshal(e.data)
		}
		out = append(out, schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: uint64(i + 1),
			EventID: fmt.Sprintf("%s-e%02d", id, i+1), Time: t0.Add(time.Duration(i) * time.Second), Type: e.typ,
			TurnID: e.turn, StepID: e.step, AttemptID: e.attempt, ToolCallID: e.tool,
			Synthetic: e.synthetic, Ignorable: e.ignorable, Data: data})
	}
	return out
}

// Check folds evs under pkg/session's rules: a fixture the writer would
// refuse would test nothing real.
func Check(evs []schema.Envelope) error {
	if len(evs) == 0 {
		return nil
	}
	st := session.New(evs[0].SessionID)
	for i := range evs {
		if err := schema.Validate(&evs[i], schema.ValidateOptions{Origin: schema.OriginService, Stored: true}); err != nil {
			return fmt.Errorf("seq %d %s: %w", evs[i].Seq, evs[i].Type, err)
		}
		if err := st.Apply(&evs[i]); err != nil {
			return fmt.Errorf("seq %d %s: %w", evs[i].Seq, evs[i].Type, err)
		}
	}
	return nil
}
