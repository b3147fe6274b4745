package gen

import (
	"bytes"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Chat is a session of turns the model sees whole, in events of about
// size bytes: a user message, a tool call and its result, the assistant's
// answer (texts with characters JSON escapes for HTML); with rewinds,
// every seventh turn takes the context back into the turn before, and
// every fiftieth into what an earlier rewind abandoned; one compaction
// early on. A turn is eight events.
func Chat(id string, turns, size int, rewinds bool, t0 time.Time) iter.Seq[schema.Envelope] {
	return func(yield func(schema.Envelope) bool) {
		var seq uint64
		pad := string(bytes.Repeat([]byte("x"), max(size-120, 0)))
		emit := func(typ, turn, call string, data any, attempt ...string) bool {
			seq++
			e := event(id, seq, "e"+strconv.FormatUint(seq, 10), t0.Add(time.Duration(seq)*time.Millisecond), typ, data)
			e.TurnID, e.ToolCallID, e.AttemptID = turn, call, strings.Join(attempt, "")
			return yield(e)
		}
		rewind := func(to uint64) bool {
			return emit(schema.TypeContextRewound, "", "", map[string]any{"toEventId": "e" + strconv.FormatUint(to, 10), "toSeq": to})
		}
		if !emit(schema.TypeSessionCreated, "", "", map[string]any{"title": "chat <" + id + ">", "agent": "claude-code"}) {
			return
		}
		var lastUser, abandonedUser uint64
		for i := 1; i <= turns; i++ {
			t, call := "t"+strconv.Itoa(i), "call_"+strconv.Itoa(i)
			user := seq + 2
			if !emit(schema.TypeTurnStarted, t, "", map[string]any{}) ||
				!emit(schema.TypeMessageUser, t, "", map[string]any{"content": fmt.Sprintf("task %d: a < b && c > d \u2028 %s", i, pad)}) ||
				!emit(schema.TypeAttemptStarted, t, "", map[string]any{"model": "m1"}, "a1") ||
				!emit(schema.TypeToolRequested, t, call, map[string]any{"name": "read_file", "input": map[string]string{"path": "/src/<" + strconv.Itoa(i) + ">.go"}}) ||
				!emit(schema.TypeToolStarted, t, call, struct{}{}) ||
				!emit(schema.TypeToolResult, t, call, map[string]any{"status": "ok", "output": "package main // & " + pad}) ||
				!emit(schema.TypeMessageAssistant, t, "", map[string]any{"content": fmt.Sprintf("done with %d & more %s", i, pad)}, "a1") ||
				!emit(schema.TypeTurnEnded, t, "", map[string]any{"reason": "completed"}) {
				return
			}
			switch {
			case i == 3:
				if !emit(schema.TypeCompactionStarted, "", "", map[string]any{"compactionId": "c1", "throughSeq": seq}) ||
					!emit(schema.TypeCompactionEnded, "", "", map[string]any{"compactionId": "c1", "throughSeq": seq - 1, "summary": "the first <3> tasks"}) {
					return
				}
			case rewinds && i%50 == 0 && abandonedUser != 0:
				if !rewind(abandonedUser) {
					return
				}
			case rewinds && i%7 == 0:
				abandonedUser = user
				if !rewind(lastUser) {
					return
				}
			}
			lastUser = user
		}
	}
}
