package client

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/writer"
)

func recoverFold(t *testing.T, evs ...string) *session.State {
	t.Helper()
	st := session.New("s-1")
	for i, l := range evs {
		var e schema.Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID = 1, "s-1", uint64(i+1), fmt.Sprintf("e%d", i+1)
		if err := st.Apply(&e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
	}
	return st
}

var recoverBase = []string{
	`{"type":"session/created"}`,
	`{"type":"turn/started","turnId":"t1"}`,
	`{"type":"tool/requested","turnId":"t1","toolCallId":"plan","data":{"name":"plan","input":{}}}`,
	`{"type":"tool/requested","turnId":"t1","toolCallId":"rm","data":{"name":"sh","input":{"cmd":"rm -rf x"}}}`,
	`{"type":"tool/started","turnId":"t1","toolCallId":"rm"}`,
	`{"type":"tool/requested","turnId":"t1","toolCallId":"put","data":{"name":"write","input":{},"idempotent":true}}`,
	`{"type":"tool/started","turnId":"t1","toolCallId":"put"}`,
	`{"type":"approval/requested","turnId":"t1","data":{"approvalId":"ap","prompt":"ok?"}}`,
}

func TestRecoveryOfRepairedSession(t *testing.T) {
	st := recoverFold(t, recoverBase...)
	interrupted := RecoveryOf(st)
	if interrupted.Repaired || interrupted.Paused || interrupted.InterruptedTurn != "t1" || len(interrupted.Open) != 4 ||
		len(interrupted.PendingApprovals) != 1 || len(interrupted.CheckWorld) != 0 {
		t.Fatalf("interrupted, not repaired: %+v", interrupted)
	}
	for _, e := range session.PlanRepair(st, session.RepairOptions{Now: time.Now()}) {
		if err := st.Apply(&e); err != nil {
			t.Fatal(err)
		}
	}
	r := RecoveryOf(st)
	if !r.Repaired || !r.Paused || !r.MustResume || r.InterruptedTurn != "t1" || len(r.Open) != 0 || len(r.PendingApprovals) != 0 {
		t.Fatalf("repaired: %+v", r)
	}
	ids := func(cs []RecoveryCall) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ToolCallID)
		}
		return out
	}
	if got := ids(r.Reschedule); !reflect.DeepEqual(got, []string{"plan"}) {
		t.Fatalf("reschedule %v", got)
	}
	if got := ids(r.CheckWorld); !reflect.DeepEqual(got, []string{"rm"}) {
		t.Fatalf("check the world %v", got)
	}
	if got := ids(r.Retry); !reflect.DeepEqual(got, []string{"put"}) {
		t.Fatalf("retry (idempotent) %v", got)
	}
	if !reflect.DeepEqual(r.ExpiredApprovals, []string{"ap"}) {
		t.Fatalf("expired approvals %v", r.ExpiredApprovals)
	}
	// After session/resumed the session may run again; the old calls stay
	// reported (they are the latest repair's) until the agent moves on.
	resumed := schema.Envelope{Type: schema.TypeSessionResumed, Data: json.RawMessage(`{"by":"op"}`)}
	if err := st.Apply(&resumed); err != nil {
		t.Fatal(err)
	}
	if r := RecoveryOf(st); r.Paused || r.MustResume || len(r.CheckWorld) != 1 {
		t.Fatalf("after resume: %+v", r)
	}
}

func TestRecoveryOfCleanSession(t *testing.T) {
	st := recoverFold(t, `{"type":"session/created"}`, `{"type":"turn/started","turnId":"t1"}`,
		`{"type":"turn/ended","turnId":"t1","data":{"reason":"completed"}}`)
	r := RecoveryOf(st)
	if r.Repaired || r.Paused || r.InterruptedTurn != "" || len(r.Open)+len(r.Reschedule)+len(r.CheckWorld)+len(r.Retry) != 0 {
		t.Fatalf("clean session: %+v", r)
	}
}

// Recover reads the session through sessions.api.read (a Client) and
// through the same pages read in process (a ReaderLoader).
func TestRecoverThroughLogstore(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	store, err := logstore.Open(context.Background(), nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := writer.New(writer.Config{Store: store, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, w.Ready)
	ctx := context.Background()
	loaders := map[string]StateLoader{"Client": New(natstest.Connect(t, s)), "InProcess": ReaderLoader{writer.StoreReader{Store: store}}}
	for name, l := range loaders {
		if _, err := Recover(ctx, l, "missing"); schema.CodeOf(err) != schema.CodeNotFound {
			t.Fatalf("%s: missing session: %v", name, err)
		}
		if _, err := Recover(ctx, l, "a.b"); schema.CodeOf(err) != schema.CodeBadRequest {
			t.Fatalf("%s: bad id: %v", name, err)
		}
	}
	st := recoverFold(t, recoverBase[:5]...)
	evs := make([]schema.Envelope, 0, 5)
	for i, l := range recoverBase[:5] {
		var e schema.Envelope
		_ = json.Unmarshal([]byte(l), &e)
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID, e.Time = 1, "s-1", uint64(i+1), fmt.Sprintf("e%d", i+1), time.Now().UTC()
		evs = append(evs, e)
	}
	res, err := store.Append(ctx, logstore.AppendRequest{SessionID: "s-1", Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	plan := session.PlanRepair(st, session.RepairOptions{})
	if _, err := store.Append(ctx, logstore.AppendRequest{SessionID: "s-1", ExpectedStreamSeq: res.StreamSeq, Events: plan}); err != nil {
		t.Fatal(err)
	}
	for name, l := range loaders {
		r, err := Recover(ctx, l, "s-1")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.Repaired || !r.MustResume || len(r.CheckWorld) != 1 || r.CheckWorld[0].ToolCallID != "rm" || len(r.Reschedule) != 1 {
			t.Fatalf("%s: recovery %+v", name, r)
		}
	}
}
