package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// history is a session touching every kind of state: two turns, tools,
// approvals, a compaction, a job, the goal, a pause, a repair.
var history = []string{
	`session/created title=demo labels={"team":"a"}`,
	`goal/updated revision=1`,
	`turn/started turn=t1 input={"text":"hi"}`,
	`step/started turn=t1 step=s1`,
	`attempt/started turn=t1 attempt=a1`,
	`attempt/interrupted turn=t1 attempt=a1`,
	`attempt/started turn=t1 attempt=a2`,
	`message/assistant turn=t1 attempt=a2 usage={"in":1}`,
	`tool/requested turn=t1 call=c1 idempotent=true`,
	`approval/requested turn=t1 approvalId=ap1 toolCallId=c1`,
	`approval/decided turn=t1 approvalId=ap1`,
	`tool/started turn=t1 call=c1`,
	`tool/result turn=t1 call=c1 status=ok`,
	`step/ended turn=t1 step=s1`,
	`turn/ended turn=t1`,
	`compaction/started compactionId=k1 throughSeq=10`,
	`compaction/ended compactionId=k1 throughSeq=10`,
	`job/started jobId=j1`,
	`session/paused`,
	`goal/updated revision=2 status=paused`,
	`session/resumed`,
	`turn/started turn=t2`,
	`tool/requested turn=t2 call=c2`,
	`tool/started turn=t2 call=c2`,
	`repair/applied synthetic closed=[{"kind":"tool_started","id":"c2","turnId":"t2"},{"kind":"job","id":"j1"}]`,
	`tool/result turn=t2 call=c2 status=outcome_unknown synthetic`,
	`job/ended jobId=j1 status=orphaned synthetic`,
	`turn/ended turn=t2 reason=interrupted synthetic`,
	`session/paused reason=repaired synthetic`,
}

func fold(t *testing.T, s *State, lines []string) {
	t.Helper()
	for i, line := range lines {
		e := sessiontest.Event(t, line)
		e.SessionID = s.SessionID
		e.EventID = fmt.Sprintf("e%d", s.LastSeq+1)
		e.Time = time.Date(2026, 12, 2, 15, 0, int(s.LastSeq), 0, time.UTC)
		if err := s.Apply(e); err != nil {
			t.Fatalf("event %d %s: %v", i, line, err)
		}
	}
}

func TestStateJSONRoundTrip(t *testing.T) {
	s := New("s-1")
	fold(t, s, history)
	b := mustJSON(t, s)
	got, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2 := mustJSON(t, got); !bytes.Equal(b, b2) {
		t.Fatalf("round trip differs:\n%s\n%s", b, b2)
	}
	if !reflect.DeepEqual(got.usedTurns, s.usedTurns) || len(got.usedTurns) != 2 {
		t.Fatalf("used turns: got %v, want %v", got.usedTurns, s.usedTurns)
	}
	if !strings.Contains(string(b), `"usedTurnHashes":"`) {
		t.Fatalf("used turns not in JSON: %s", b)
	}

	// The decoded state still refuses a used turn id.
	fold(t, got, []string{`session/resumed`})
	err = got.Check(sessiontest.Event(t, `turn/started turn=t1`))
	if schema.CodeOf(err) != schema.CodeStructure || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("reused turn id after decode: %v", err)
	}

	t.Run("ByValue", func(t *testing.T) {
		v, err := json.Marshal(*s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v, b) {
			t.Fatalf("State marshalled by value differs:\n%s\n%s", v, b)
		}
	})
	t.Run("EmbeddedInAnotherDocument", func(t *testing.T) {
		type view struct {
			State State `json:"state"`
		}
		vb, err := json.Marshal(view{State: *s})
		if err != nil {
			t.Fatal(err)
		}
		var v view
		if err := json.Unmarshal(vb, &v); err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, &v.State); !bytes.Equal(got, b) {
			t.Fatalf("differs:\n%s\n%s", got, b)
		}
	})
	t.Run("UnmarshalResets", func(t *testing.T) {
		other := New("s-1")
		fold(t, other, []string{`session/created`, `turn/started turn=t9`})
		if err := json.Unmarshal(b, other); err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, other); !bytes.Equal(got, b) {
			t.Fatalf("differs:\n%s\n%s", got, b)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		e := New("s-1")
		got, err := UnmarshalState(mustJSON(t, e))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("got %+v, want %+v", got, e)
		}
	})
	t.Run("Garbage", func(t *testing.T) {
		if _, err := UnmarshalState([]byte(`{"lastSeq":"x"}`)); err == nil {
			t.Fatal("decoded")
		}
	})
}

// TestResumeFromJSON: for every prefix, a state decoded from the prefix's
// JSON and folded over the rest equals the state folded in one go.
func TestResumeFromJSON(t *testing.T) {
	full := New("s-1")
	fold(t, full, history)
	want := mustJSON(t, full)
	for k := range history {
		s := New("s-1")
		fold(t, s, history[:k])
		r, err := UnmarshalState(mustJSON(t, s))
		if err != nil {
			t.Fatal(err)
		}
		fold(t, r, history[k:])
		if got := mustJSON(t, r); !bytes.Equal(got, want) {
			t.Fatalf("resumed after %d events:\n got %s\nwant %s", k, got, want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	s := New("s-1")
	fold(t, s, history[:13]) // t1 open, c1 done
	want := mustJSON(t, s)
	c := s.Clone()
	if got := mustJSON(t, c); !bytes.Equal(got, want) {
		t.Fatalf("clone differs:\n%s\n%s", got, want)
	}
	fold(t, c, []string{`step/ended turn=t1 step=s1`, `turn/ended turn=t1`, `turn/started turn=t3`})
	c.Tools["c1"].Status = "changed"
	c.Meta.Labels["team"] = "b"
	c.Goal.Revision = 9
	if got := mustJSON(t, s); !bytes.Equal(got, want) {
		t.Fatalf("changing the clone changed the original:\n%s\n%s", got, want)
	}
	if _, ok := s.usedTurns[idHash("t3")]; ok {
		t.Fatal("used turns shared with the clone")
	}
}

func TestApplyRefusedLeavesStateUnchanged(t *testing.T) {
	s := New("s-1")
	fold(t, s, history[:9]) // t1 open, tool c1 requested, step s1 open
	refused := []string{
		`session/created`,
		`turn/started turn=t2`,
		`turn/ended turn=t1`,
		`tool/result turn=t1 call=c1 status=ok`,
		`tool/requested turn=t1 call=c1`,
		`approval/decided turn=t1 approvalId=ap9`,
		`attempt/started turn=t1 attempt=a1`,
		`goal/updated revision=3`,
		`compaction/started compactionId=k1 throughSeq=99`,
		`session/resumed`,
		`message/user seq=99`,
	}
	for _, line := range refused {
		t.Run(line, func(t *testing.T) {
			before := s.Clone()
			if err := s.Apply(sessiontest.Event(t, line)); err == nil {
				t.Fatal("accepted")
			}
			if !reflect.DeepEqual(s.Clone(), before) {
				t.Fatalf("state changed:\n%s\n%s", mustJSON(t, s), mustJSON(t, before))
			}
		})
	}
}

func TestOpenWork(t *testing.T) {
	s := New("s-1")
	if s.Exists() || s.HasOpenWork() || s.OpenWork() != nil {
		t.Fatal("a new session has no events and no open work")
	}
	fold(t, s, []string{
		`session/created`,
		`job/started jobId=j1`,
		`turn/started turn=t1`,
		`tool/requested turn=t1 call=c2 idempotent=true`,
		`tool/requested turn=t1 call=c1`,
		`tool/started turn=t1 call=c1`,
		`step/started turn=t1 step=s1`,
		`approval/requested turn=t1 approvalId=ap1`,
		`compaction/started turn=t1 compactionId=k1 throughSeq=2`,
		`attempt/started turn=t1 attempt=a1`,
	})
	want := []OpenItem{
		{Kind: OpenJob, ID: "j1", StartSeq: 2},
		{Kind: OpenToolNotStarted, ID: "c2", TurnID: "t1", StartSeq: 4, Idempotent: true},
		{Kind: OpenToolStarted, ID: "c1", TurnID: "t1", StartSeq: 5},
		{Kind: OpenStep, ID: "s1", TurnID: "t1", StartSeq: 7},
		{Kind: OpenApproval, ID: "ap1", TurnID: "t1", StartSeq: 8},
		{Kind: OpenCompaction, ID: "k1", TurnID: "t1", StartSeq: 9},
		{Kind: OpenAttempt, ID: "a1", TurnID: "t1", StartSeq: 10},
	}
	for range 5 { // map order must not matter
		if got := s.OpenWork(); !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %+v\nwant %+v", got, want)
		}
	}
	if !s.Exists() || !s.HasOpenWork() {
		t.Fatal("open work not reported")
	}
	if s.LastEventID != "e10" || !s.LastTime.Equal(time.Date(2026, 12, 2, 15, 0, 9, 0, time.UTC)) {
		t.Fatalf("last event %s at %v", s.LastEventID, s.LastTime)
	}
	if !s.CreatedAt.Equal(time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("created at %v", s.CreatedAt)
	}
}

// TestRandomHistories folds random event streams through applyChecked,
// which checks on every event that Check and Apply agree, that a refusal
// changes nothing, and that a state resumed from JSON folds identically.
func TestRandomHistories(t *testing.T) {
	ids := []string{"t1", "t2"}
	pick := func(r *rand.Rand, xs ...string) string { return xs[r.IntN(len(xs))] }
	gen := func(r *rand.Rand, s *State) string {
		turn := pick(r, ids...)
		if s.Turn != nil && r.IntN(4) > 0 {
			turn = s.Turn.ID
		}
		syn := ""
		if r.IntN(4) == 0 {
			syn = " synthetic"
		}
		switch r.IntN(22) {
		case 0:
			return "session/created"
		case 1:
			if r.IntN(3) == 0 {
				return "session/paused" + syn
			}
			return "message/user"
		case 2:
			return "session/resumed"
		case 3:
			if r.IntN(40) == 0 {
				return "session/closed"
			}
			return "message/user"
		case 4:
			return "turn/started turn=" + turn + fmt.Sprint(r.IntN(3))
		case 5:
			return "turn/ended turn=" + turn + syn
		case 6, 7:
			return fmt.Sprintf("%s turn=%s step=s%d%s", pick(r, "step/started", "step/ended"), turn, r.IntN(2), syn)
		case 8, 9:
			return fmt.Sprintf("%s turn=%s attempt=a%d%s", pick(r, "attempt/started", "message/assistant", "attempt/interrupted"), turn, r.IntN(3), syn)
		case 10, 11, 12:
			typ := pick(r, "tool/requested", "tool/started", "tool/result")
			st := ""
			if typ == "tool/result" {
				st = " status=" + pick(r, "ok", "error", "not_started", "outcome_unknown")
			}
			return fmt.Sprintf("%s turn=%s call=c%d%s%s", typ, turn, r.IntN(4), st, syn)
		case 13, 14:
			if r.IntN(2) == 0 {
				return fmt.Sprintf("approval/requested turn=%s approvalId=ap%d toolCallId=c%d", turn, r.IntN(3), r.IntN(4))
			}
			return fmt.Sprintf("approval/decided turn=%s approvalId=ap%d%s", turn, r.IntN(3), syn)
		case 15, 16:
			through := r.IntN(int(s.LastSeq)+2) + 1
			for _, c := range s.Compactions {
				if c.Open() && r.IntN(2) == 0 {
					through = int(c.ThroughSeq)
				}
			}
			return fmt.Sprintf("%s compactionId=k%d throughSeq=%d%s", pick(r, "compaction/started", "compaction/ended"), r.IntN(3), through, syn)
		case 17:
			return fmt.Sprintf("compaction/aborted compactionId=k%d%s", r.IntN(3), syn)
		case 18:
			return fmt.Sprintf("%s jobId=j%d%s", pick(r, "job/started", "job/ended"), r.IntN(3), syn)
		case 19:
			rev := 1
			if s.Goal != nil {
				rev = s.Goal.Revision + r.IntN(3) - 1
			}
			return fmt.Sprintf("goal/updated revision=%d", max(rev, 1))
		case 20:
			return "repair/applied synthetic"
		default:
			return "stats/tokens ignorable"
		}
	}
	seeds := uint64(100)
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 1))
		s := New("s-1")
		for range 150 {
			line := gen(r, s)
			if s.LastSeq == 0 && r.IntN(3) > 0 {
				line = "session/created"
				if r.IntN(3) == 0 {
					line = `session/created synthetic parent={"sessionId":"p","seedLength":20,"depth":1}`
				}
			}
			if s.Forking && r.IntN(10) == 0 {
				line = "fork/committed seedLength=" + pick(r, "20", "5") + " synthetic"
			}
			e := sessiontest.Event(t, line)
			if schema.Validate(e, schema.ValidateOptions{Origin: schema.OriginService}) != nil {
				continue
			}
			applyChecked(t, s, e)
			checkOpenIndex(t, s)
			if s.Turn == nil {
				for _, it := range s.OpenWork() {
					if it.TurnID != "" {
						t.Fatalf("seed %d: %s of turn %s open after the turn ended", seed, it.Kind, it.TurnID)
					}
				}
			}
		}
	}
}

// checkOpenIndex fails unless the open index Apply keeps up to date
// equals the one built from the maps (as for a state decoded from JSON).
func checkOpenIndex(t *testing.T, s *State) {
	t.Helper()
	got := maps.Clone(s.openIndex())
	fresh := *s
	fresh.open = nil
	if want := fresh.openIndex(); !maps.Equal(got, want) {
		t.Fatalf("open index after seq %d:\n got %v\nwant %v", s.LastSeq, got, want)
	}
}

// TestStateJSONBeforeHashes reads a state as versions before the hashes
// wrote it (a projector's older snapshot): its used turn ids and spent
// items are still refused, and it is written back in the new form.
func TestStateJSONBeforeHashes(t *testing.T) {
	old := `{"sessionId":"s-1","lastSeq":20,"lastTime":"2026-12-04T00:00:00Z","createdAt":"2026-12-04T00:00:00Z","meta":{},"turns":2,` +
		`"spentTools":{"c1":{"t":"t1","s":3,"o":"ok"}},"spentApprovals":{"ap1":{"t":"t1","s":5,"o":"approved"}},"usedTurns":["t1","t2"]}`
	s, err := UnmarshalState([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(sessiontest.Event(t, `turn/started turn=t2`)); schema.CodeOf(err) != schema.CodeStructure || !strings.Contains(err.Error(), "turn id t2 was already used") {
		t.Errorf("a used turn id: %v", err)
	}
	fold(t, s, []string{`turn/started turn=t3`})
	for _, tc := range []struct{ line, want string }{
		{`tool/requested turn=t3 call=c1`, "tool call c1 was already requested at seq 3"},
		{`tool/started turn=t3 call=c1`, "tool call c1 belongs to a turn that has ended (requested at seq 3)"},
		{`approval/requested turn=t3 approvalId=ap1`, "approval ap1 was already requested at seq 5"},
		{`approval/decided turn=t3 approvalId=ap1`, "approval ap1 was already decided"},
	} {
		err := s.Check(sessiontest.Event(t, tc.line))
		if schema.CodeOf(err) != schema.CodeStructure || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a structure error saying %q", tc.line, err, tc.want)
		}
	}
	b := mustJSON(t, s)
	for _, gone := range []string{`"usedTurns"`, `"spentTools"`, `"spentApprovals"`} {
		if strings.Contains(string(b), gone) {
			t.Errorf("written back with %s: %s", gone, b)
		}
	}
	if back, err := UnmarshalState(b); err != nil || !reflect.DeepEqual(back.spentTools, s.spentTools) || !reflect.DeepEqual(back.usedTurns, s.usedTurns) {
		t.Fatalf("round trip: %v", err)
	}
}
