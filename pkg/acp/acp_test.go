package acp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/acp"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

func ev(typ, data string) *schema.Envelope {
	return &schema.Envelope{SchemaVersion: 1, SessionID: "s", Seq: 7, EventID: "e7", Time: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC),
		Type: typ, TurnID: "t", ToolCallID: "c", AttemptID: "a", Data: json.RawMessage(data)}
}

// Each event maps by itself (no state), every update names its event in
// _meta.sessionlog, and each kind of event becomes the update docs/acp.md
// says.
func TestMap(t *testing.T) {
	for _, c := range []struct {
		name, typ, data string
		n               int      // updates
		want            []string // what the updates' JSON holds, in order
	}{
		{"UserMessageChunks", schema.TypeMessageUser, `{"content":["one",{"type":"text","text":"two"},{"type":"image"}]}`, 3, []string{
			`"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"one"},"messageId":"e7"`,
			`"text":"two"`, `"text":"{\"type\":\"image\"}"`}},
		{"AgentMessageWithUsage", schema.TypeMessageAssistant, `{"content":"hi","usage":{"input_tokens":10,"output_tokens":5,"context_window":100}}`, 2, []string{
			`"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"messageId":"e7"`,
			`"sessionUpdate":"usage_update","used":15,"size":100`}},
		{"ToolRequested", schema.TypeToolRequested, `{"name":"Bash","input":{"cmd":"ls"}}`, 1, []string{
			`"sessionUpdate":"tool_call","toolCallId":"c","title":"Bash","kind":"execute","status":"pending","rawInput":{"cmd":"ls"}`}},
		{"ToolStarted", schema.TypeToolStarted, `{}`, 1, []string{`"sessionUpdate":"tool_call_update","toolCallId":"c","status":"in_progress"`}},
		{"ToolOK", schema.TypeToolResult, `{"status":"ok","output":"x"}`, 1, []string{`"status":"completed","rawOutput":"x"`}},
		{"ToolOutcomeUnknown", schema.TypeToolResult, `{"status":"outcome_unknown"}`, 1, []string{`"text":"outcome unknown`, `"status":"failed"`, `"data":{"status":"outcome_unknown"}`}},
		{"Goal", schema.TypeGoalUpdated, `{"revision":1,"objective":"o","acceptance":["a"],"status":"done"}`, 1, []string{
			`"sessionUpdate":"plan","entries":[{"content":"o","priority":"high","status":"completed"},{"content":"a","priority":"medium","status":"completed"}]`}},
		{"Title", schema.TypeSessionCreated, `{"title":"T"}`, 1, []string{`"sessionUpdate":"session_info_update","title":"T","updatedAt":"2026-12-04T00:00:00Z"`}},
		{"MetaOnly", schema.TypeCompactionEnded, `{"compactionId":"k","summary":"s","throughSeq":3}`, 1, []string{
			`{"sessionUpdate":"session_info_update","_meta":{"sessionlog":{"seq":7,"eventId":"e7","type":"compaction/ended"`, `"data":{"compactionId":"k"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			us := acp.Map(ev(c.typ, c.data))
			if len(us) != c.n {
				t.Fatalf("%d updates, want %d", len(us), c.n)
			}
			var all string
			for i, u := range us {
				b, _ := json.Marshal(u)
				if !strings.Contains(string(b), `"seq":7,"eventId":"e7"`) {
					t.Errorf("update %d does not name its event: %s", i, b)
				}
				all += string(b) + "\n"
			}
			rest := all
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("updates:\n%s\nwant them to hold, in order, %s", all, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
