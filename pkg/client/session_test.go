package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/writer"
)

func types(evs []logstore.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// A whole turn through the helpers: each checkpoint is durable before the
// step it guards (the LLM call sees attempt/started stored, the side
// effect sees tool/started stored), the turn end is durable when EndTurn
// returns, and the local state matches a Load from the log.
func TestSessionLifecycle(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	sess, err := s.c.Create(ctx, "life", "agent-1", schema.SessionCreated{Title: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	lastStored := func() string {
		evs := storedEvents(t, s.st, "life")
		return evs[len(evs)-1].Type
	}
	if _, err := sess.StartTurn(ctx, json.RawMessage(`"do it"`)); err != nil {
		t.Fatal(err)
	}
	if err := sess.UserMessage(ctx, json.RawMessage(`"hello"`)); err != nil {
		t.Fatal(err)
	}
	if err := sess.UpdateGoal(ctx, schema.GoalUpdated{Objective: "demo", Status: "active"}); err != nil {
		t.Fatal(err)
	}
	reply, err := sess.RunAttempt(ctx, "m1", func(ctx context.Context, attemptID string) (json.RawMessage, json.RawMessage, error) {
		if got := lastStored(); got != schema.TypeAttemptStarted {
			t.Errorf("LLM call ran with %s last stored, want attempt/started", got)
		}
		return json.RawMessage(`"answer"`), nil, nil
	})
	if err != nil || string(reply) != `"answer"` {
		t.Fatalf("attempt: %s %v", reply, err)
	}
	// A failed LLM call is recorded as interrupted.
	if _, err := sess.RunAttempt(ctx, "m1", func(context.Context, string) (json.RawMessage, json.RawMessage, error) {
		return nil, nil, errors.New("rate limited")
	}); err == nil || err.Error() != "rate limited" {
		t.Fatalf("failed attempt: %v", err)
	}
	approval, err := sess.RequestApproval(ctx, "", "run it?")
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.DecideApproval(ctx, approval, schema.DecisionApproved, "human"); err != nil {
		t.Fatal(err)
	}
	ran := false
	out, err := sess.RunTool(ctx, client.ToolCall{Name: "sh", Input: json.RawMessage(`{"cmd":"ls"}`)}, func(context.Context) (json.RawMessage, error) {
		ran = true
		if got := lastStored(); got != schema.TypeToolStarted {
			t.Errorf("side effect ran with %s last stored, want tool/started", got)
		}
		return json.RawMessage(`"files"`), nil
	})
	if err != nil || !ran || string(out) != `"files"` {
		t.Fatalf("tool: %s %v ran=%v", out, err, ran)
	}
	job, err := sess.StartJob(ctx, "", json.RawMessage(`["sleep","1"]`))
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	if err := sess.EndJob(ctx, job, schema.JobExited, &code); err != nil {
		t.Fatal(err)
	}
	if err := sess.EndTurn(ctx, schema.TurnCompleted); err != nil {
		t.Fatal(err)
	}
	if got := lastStored(); got != schema.TypeTurnEnded {
		t.Fatalf("EndTurn returned with %s last stored", got)
	}
	want := []string{"session/created", "turn/started", "message/user", "goal/updated", "attempt/started", "message/assistant",
		"attempt/started", "attempt/interrupted", "approval/requested", "approval/decided", "tool/requested", "tool/started", "tool/result",
		"job/started", "job/ended", "turn/ended"}
	if got := types(storedEvents(t, s.st, "life")); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored %v\nwant %v", got, want)
	}
	// Load through the store and through the client's own connection
	// rebuild the same state as the handle kept.
	for name, load := range map[string]func() (*session.State, error){
		"Store":  func() (*session.State, error) { return client.Load(ctx, writer.StoreReader{Store: s.st}, "life") },
		"Client": func() (*session.State, error) { return s.c.LoadState(ctx, "life") },
	} {
		st, err := load()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a, _ := json.Marshal(st)
		b, _ := json.Marshal(sess.State())
		if string(a) != string(b) {
			t.Fatalf("%s: loaded state\n%s\ndiffers from the handle's\n%s", name, a, b)
		}
	}
	if hb, err := sess.Heartbeat(ctx); err != nil || hb.TTL <= 0 || hb.Holder != "agent-1" {
		t.Fatalf("heartbeat %+v %v", hb, err)
	}
	if l, _, err := s.st.GetLease(ctx, "life"); err != nil || l == nil || l.Holder != "agent-1" {
		t.Fatalf("lease %+v %v", l, err)
	}

	// A recovering agent under another holder name: refused while
	// agent-1's lease is live, until it takes the session over.
	rec, err := s.c.Open(ctx, "life", "agent-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.UserMessage(ctx, json.RawMessage(`"back"`)); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("append of another holder while the lease is live: %v, want ErrConflict", err)
	}
	if _, err := rec.Heartbeat(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("heartbeat of another holder while the lease is live: %v, want ErrConflict", err)
	}
	if hb, err := rec.TakeOver(ctx); err != nil || hb.Holder != "agent-2" {
		t.Fatalf("take over: %+v %v", hb, err)
	}
	if err := rec.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.UserMessage(ctx, json.RawMessage(`"back"`)); err != nil {
		t.Fatalf("append after the takeover: %v", err)
	}
	if _, err := sess.Heartbeat(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("the former holder's heartbeat after the takeover: %v, want ErrConflict", err)
	}
}

// StartTool does not let the side effect run unless tool/started is
// committed: not when the session is paused, not when no writer answers,
// not when another writer moved the session (conflict).
func TestRunToolNeedsDurableStart(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	never := func(context.Context) (json.RawMessage, error) {
		t.Error("side effect ran without a durable tool/started")
		return nil, nil
	}

	// Paused.
	sess, err := s.c.Create(ctx, "paused", "agent-1", schema.SessionCreated{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.StartTurn(ctx, nil); err != nil {
		t.Fatal(err)
	}
	call, err := sess.RequestTool(ctx, client.ToolCall{Name: "rm"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Pause(ctx, "operator"); err != nil {
		t.Fatal(err)
	}
	n := len(storedEvents(t, s.st, "paused"))
	if _, err := sess.RunTool(ctx, client.ToolCall{ID: call, Name: "rm"}, never); !errors.Is(err, client.ErrPaused) {
		t.Fatalf("paused: %v", err)
	}
	if got := len(storedEvents(t, s.st, "paused")); got != n {
		t.Fatalf("paused session grew from %d to %d events", n, got)
	}

	// Someone else appended (the handle's expectedSeq is stale): conflict,
	// and the handle refuses to go on until it reloads.
	other, err := s.c.Create(ctx, "moved", "agent-1", schema.SessionCreated{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.StartTurn(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.Append(ctx, client.AppendRequest{SessionID: "moved", Events: []schema.Envelope{msg("from elsewhere")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RunTool(ctx, client.ToolCall{Name: "rm"}, never); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("moved: %v", err)
	}
	if _, err := other.RunTool(ctx, client.ToolCall{Name: "rm"}, never); !errors.Is(err, client.ErrStale) {
		t.Fatalf("stale handle: %v", err)
	}
	if err := other.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RunTool(ctx, client.ToolCall{Name: "ls"}, func(context.Context) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatalf("after reload: %v", err)
	}

	// No writer: the tool/started request reaches nobody.
	third, err := s.c.Create(ctx, "down", "agent-1", schema.SessionCreated{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := third.StartTurn(ctx, nil); err != nil {
		t.Fatal(err)
	}
	call, err = third.RequestTool(ctx, client.ToolCall{Name: "rm"})
	if err != nil {
		t.Fatal(err)
	}
	nc2 := natstest.Connect(t, natstest.RunServer(t)) // a server no writer serves
	lone, err := client.New(nc2).OpenFrom(ctx, writer.StoreReader{Store: s.st}, "down", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lone.RunTool(ctx, client.ToolCall{ID: call, Name: "rm"}, never); !errors.Is(err, client.ErrNotCommitted) {
		t.Fatalf("no writer: %v", err)
	}
}

// Live events go to sessions.live.<id> with the durable seq they follow,
// and are never stored.
func TestLive(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	sess, err := s.c.Create(ctx, "live", "agent-1", schema.SessionCreated{})
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := logstore.LiveSubject("live")
	sub, err := s.nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Live(ctx, json.RawMessage(`{"delta":"tok"}`)); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		SessionID string          `json:"sessionId"`
		AfterSeq  uint64          `json:"afterSeq"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m.Data, &got); err != nil || got.SessionID != "live" || got.AfterSeq != 1 || string(got.Data) != `{"delta":"tok"}` {
		t.Fatalf("live event %s: %v", m.Data, err)
	}
	if _, err := sess.StartTurn(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(storedEvents(t, s.st, "live")); n != 2 {
		t.Fatalf("%d events stored: the live one must not be", n)
	}
}

// Load refuses a session it cannot fold instead of guessing.
func TestLoadUnreadable(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := s.st.Append(ctx, logstore.AppendRequest{SessionID: "odd", Events: []schema.Envelope{
		{SchemaVersion: 1, SessionID: "odd", Seq: 1, EventID: "e1", Time: now, Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)},
		{SchemaVersion: 1, SessionID: "odd", Seq: 2, EventID: "e2", Time: now, Type: "future/thing", Data: json.RawMessage(`{}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Load(ctx, writer.StoreReader{Store: s.st}, "odd"); !errors.Is(err, client.ErrUnreadable) {
		t.Fatalf("load: %v", err)
	}
	// The writer refuses to append to it either, with the judge's verdict
	// on the stored event (unreadable, as every reader of it says), not
	// the unknown_type an append of such an event gets.
	if _, err := s.c.Append(ctx, client.AppendRequest{SessionID: "odd", Events: []schema.Envelope{msg("x")}}); !errors.Is(err, client.ErrUnreadable) {
		t.Fatalf("append to unreadable session: %v", err)
	}
	if st, err := client.Load(ctx, writer.StoreReader{Store: s.st}, "none"); err != nil || st.Exists() {
		t.Fatalf("missing session: %+v %v", st, err)
	}
	// The same through sessions.api.read.
	if _, err := s.c.LoadState(ctx, "odd"); !errors.Is(err, client.ErrUnreadable) {
		t.Fatalf("load through the client: %v", err)
	}
	if st, err := s.c.LoadState(ctx, "none"); err != nil || st.Exists() {
		t.Fatalf("missing session through the client: %+v %v", st, err)
	}
}
