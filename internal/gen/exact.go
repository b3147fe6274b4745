package gen

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TurnEvents is the number of events of one generated turn.
const TurnEvents = 8

// Exact calls emit with a valid session of n events: session/created,
// then turns of TurnEvents events (turn, user message, attempt, reply,
// tool request, start, result, turn end), padded with user messages so
// that seq n is a safe point. Events carry about 200 bytes of content.
func Exact(sessionID string, n int, emit func(schema.Envelope) error) error {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	seq := uint64(0)
	next := func(typ, turn string, mod func(*schema.Envelope), data any) error {
		seq++
		e := event(sessionID, seq, fmt.Sprintf("ev%08d", seq), t0.Add(time.Duration(seq)*time.Millisecond), typ, data)
		e.TurnID = turn
		if mod != nil {
			mod(&e)
		}
		return emit(e)
	}
	text := strings.Repeat("lorem ipsum dolor sit amet ", 7)
	if err := next(schema.TypeSessionCreated, "", nil, schema.SessionCreated{Title: "bench " + sessionID, Agent: "bench"}); err != nil {
		return err
	}
	for turn := 1; int(seq) < n; turn++ {
		left := n - int(seq)
		if left < TurnEvents {
			for range left {
				if err := next(schema.TypeMessageUser, "", nil, map[string]any{"content": text}); err != nil {
					return err
				}
			}
			break
		}
		tid := fmt.Sprintf("t%d", turn)
		call := fmt.Sprintf("c%d", turn)
		steps := []struct {
			typ  string
			mod  func(*schema.Envelope)
			data any
		}{
			{schema.TypeTurnStarted, nil, nil},
			{schema.TypeMessageUser, nil, map[string]any{"content": text}},
			{schema.TypeAttemptStarted, func(e *schema.Envelope) { e.AttemptID = "a1" }, map[string]any{"model": "m"}},
			{schema.TypeMessageAssistant, func(e *schema.Envelope) { e.AttemptID = "a1" }, map[string]any{"content": text}},
			{schema.TypeToolRequested, func(e *schema.Envelope) { e.ToolCallID = call }, map[string]any{"name": "sh", "input": map[string]string{"cmd": "ls -l"}}},
			{schema.TypeToolStarted, func(e *schema.Envelope) { e.ToolCallID = call }, nil},
			{schema.TypeToolResult, func(e *schema.Envelope) { e.ToolCallID = call }, map[string]any{"status": "ok", "output": text}},
			{schema.TypeTurnEnded, nil, map[string]any{"reason": "completed"}},
		}
		for _, st := range steps {
			if err := next(st.typ, tid, st.mod, st.data); err != nil {
				return err
			}
		}
	}
	return nil
}

// Seed appends a generated session of n events through the store, in
// atomic batches of at most batch events, and returns its tail.
func Seed(ctx context.Context, st *logstore.Store, sessionID string, n, batch int) (logstore.Tail, error) {
	if batch <= 0 || batch > schema.MaxBatchEvents {
		batch = schema.MaxBatchEvents
	}
	var expected uint64
	var tail logstore.Tail
	buf := make([]schema.Envelope, 0, batch)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		res, err := st.Append(ctx, logstore.AppendRequest{SessionID: sessionID, ExpectedStreamSeq: expected, Events: buf})
		if err != nil {
			return fmt.Errorf("seed %s at seq %d: %w", sessionID, buf[0].Seq, err)
		}
		expected = res.StreamSeq
		tail = logstore.Tail{Seq: res.LastSeq, StreamSeq: res.StreamSeq, EventID: buf[len(buf)-1].EventID}
		buf = buf[:0]
		return nil
	}
	err := Exact(sessionID, n, func(e schema.Envelope) error {
		buf = append(buf, e)
		if len(buf) == batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return tail, err
}
