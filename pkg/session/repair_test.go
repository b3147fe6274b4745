package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The datadriven scripts in testdata/repair:
//
//	fold [paused]
//	<type> [turn=T] [step=S] [attempt=A] [call=C] [{data json}]
//	----
//	the state's open work
//
//	repair [keep-approvals] [reason=...]
//	----
//	the plan, one event a line; then the result of applying it to a clone
//	(every event must be accepted by State.Apply) and of planning again.
//
// Regenerate with: go test ./pkg/session -run TestRepairDatadriven -rewrite

var repairTestNow = time.Date(2026, 12, 2, 15, 4, 5, 0, time.UTC)

func repairParseEvent(t testing.TB, line string) schema.Envelope {
	t.Helper()
	e := schema.Envelope{}
	rest := strings.TrimSpace(line)
	if i := strings.IndexByte(rest, '{'); i >= 0 {
		e.Data = json.RawMessage(rest[i:])
		rest = strings.TrimSpace(rest[:i])
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		t.Fatalf("empty event line")
	}
	e.Type = fields[0]
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("bad field %q in %q", f, line)
		}
		switch k {
		case "turn":
			e.TurnID = v
		case "step":
			e.StepID = v
		case "attempt":
			e.AttemptID = v
		case "call":
			e.ToolCallID = v
		default:
			t.Fatalf("unknown field %q in %q", k, line)
		}
	}
	return e
}

// repairFold folds agent events (as the writer would store them) into a
// fresh state.
func repairFold(t testing.TB, lines []string) (*State, error) {
	t.Helper()
	s := New("s-1")
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		e := repairParseEvent(t, l)
		e.SchemaVersion, e.SessionID, e.Seq = schema.Version, "s-1", s.LastSeq+1
		e.EventID = fmt.Sprintf("ev%d", e.Seq)
		e.Time = repairTestNow
		if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginAgent, Stored: true}); err != nil {
			return s, fmt.Errorf("seq %d %s: %w", e.Seq, e.Type, err)
		}
		if err := s.Apply(&e); err != nil {
			return s, fmt.Errorf("seq %d %s: %w", e.Seq, e.Type, err)
		}
	}
	return s, nil
}

func repairDescribeOpen(s *State) string {
	var b strings.Builder
	if s.Turn != nil {
		fmt.Fprintf(&b, "turn %s open\n", s.Turn.ID)
	}
	for _, it := range s.OpenWork() {
		fmt.Fprintf(&b, "open %s %s", it.Kind, it.ID)
		if it.TurnID != "" {
			fmt.Fprintf(&b, " turn=%s", it.TurnID)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		b.WriteString("nothing open\n")
	}
	if s.Paused {
		b.WriteString("paused\n")
	}
	return b.String()
}

func repairFormatEvent(e *schema.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s", e.Seq, e.EventID, e.Type)
	for _, f := range []struct{ k, v string }{{"turn", e.TurnID}, {"step", e.StepID}, {"attempt", e.AttemptID}, {"call", e.ToolCallID}} {
		if f.v != "" {
			fmt.Fprintf(&b, " %s=%s", f.k, f.v)
		}
	}
	if !e.Synthetic {
		b.WriteString(" NOT-SYNTHETIC")
	}
	fmt.Fprintf(&b, " %s", e.Data)
	return b.String()
}

// repairCheckPlan applies plan to a clone of s: every event must validate as
// a stored service event and be accepted by Apply. It returns the clone.
func repairCheckPlan(t testing.TB, s *State, plan []schema.Envelope) (*State, error) {
	t.Helper()
	c := s.Clone()
	for i := range plan {
		e := plan[i]
		if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginService, Stored: true}); err != nil {
			return c, fmt.Errorf("event %d (%s): validate: %w", i, e.Type, err)
		}
		// The stored form must decode back to the same envelope.
		b, err := schema.Encode(&e)
		if err != nil {
			return c, fmt.Errorf("event %d: encode: %w", i, err)
		}
		d, err := schema.Decode(b)
		if err != nil {
			return c, fmt.Errorf("event %d: decode: %w", i, err)
		}
		if err := c.Apply(&d); err != nil {
			return c, fmt.Errorf("event %d (%s): apply: %w", i, e.Type, err)
		}
	}
	return c, nil
}

func TestRepairDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata/repair", func(t *testing.T, path string) {
		var s *State
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "fold":
				var err error
				s, err = repairFold(t, strings.Split(td.Input, "\n"))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return repairDescribeOpen(s)
			case "repair":
				if s == nil {
					t.Fatalf("%s: repair before fold", td.Pos)
				}
				opt := RepairOptions{Now: repairTestNow, KeepApprovalsPending: td.HasArg("keep-approvals")}
				if td.HasArg("reason") {
					td.ScanArgs(t, "reason", &opt.Reason)
				}
				if td.HasArg("expired") {
					exp := repairTestNow.Add(-5 * time.Second)
					opt.LeaseExpiredAt = &exp
				}
				plan := PlanRepair(s, opt)
				if plan == nil {
					return "no plan\n"
				}
				var b strings.Builder
				for i := range plan {
					b.WriteString(repairFormatEvent(&plan[i]))
					b.WriteString("\n")
				}
				after, err := repairCheckPlan(t, s, plan)
				if err != nil {
					fmt.Fprintf(&b, "REFUSED: %v\n", err)
					return b.String()
				}
				b.WriteString("after:\n")
				b.WriteString(repairDescribeOpen(after))
				if again := PlanRepair(after, opt); again != nil {
					fmt.Fprintf(&b, "AGAIN: %d events\n", len(again))
				}
				return b.String()
			}
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			return ""
		})
	})
}

// repairRow is one row of DESIGN.md section 6's table: the events that
// leave it open inside turn t1 (with a unique suffix), and the closer.
type repairRow struct {
	kind   OpenKind
	open   func(id string) []string
	closer string // type and, for data-bearing closers, the distinguishing value
}

var repairRows = []repairRow{
	{OpenAttempt, func(id string) []string { return []string{"attempt/started turn=t1 attempt=a" + id} }, "attempt/interrupted"},
	{OpenToolNotStarted, func(id string) []string {
		return []string{`tool/requested turn=t1 call=r` + id + ` {"name":"sh","input":{}}`}
	}, "tool/result not_started"},
	{OpenToolStarted, func(id string) []string {
		return []string{`tool/requested turn=t1 call=s` + id + ` {"name":"sh","input":{},"idempotent":true}`, "tool/started turn=t1 call=s" + id}
	}, "tool/result outcome_unknown"},
	{OpenApproval, func(id string) []string {
		return []string{`approval/requested turn=t1 {"approvalId":"p` + id + `","prompt":"ok?"}`}
	}, "approval/decided expired"},
	{OpenJob, func(id string) []string { return []string{`job/started turn=t1 {"jobId":"j` + id + `"}`} }, "job/ended orphaned"},
	{OpenCompaction, func(id string) []string {
		return []string{`compaction/started {"compactionId":"c` + id + `","throughSeq":1}`}
	}, "compaction/aborted"},
	{OpenStep, func(id string) []string { return []string{"step/started turn=t1 step=st" + id} }, "step/ended interrupted"},
}

func repairCloserOf(e *schema.Envelope) string {
	var d struct {
		Status   string `json:"status"`
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	_ = json.Unmarshal(e.Data, &d)
	switch e.Type {
	case schema.TypeToolResult, schema.TypeJobEnded:
		return e.Type + " " + d.Status
	case schema.TypeApprovalDecided:
		return e.Type + " " + d.Decision
	case schema.TypeStepEnded, schema.TypeTurnEnded:
		return e.Type + " " + d.Reason
	}
	return e.Type
}

// TestRepairEveryCombination builds every subset of the table's rows (one
// compaction at most: only one may be open), with and without an open
// turn around them, plans, and checks the plan closes exactly those items,
// in opening order, is accepted by Apply, and leaves the session paused
// with nothing open and nothing more to plan.
func TestRepairEveryCombination(t *testing.T) {
	for mask := 0; mask < 1<<len(repairRows); mask++ {
		for _, turnOpen := range []bool{true, false} {
			var rows []repairRow
			for i, r := range repairRows {
				if mask&(1<<i) != 0 {
					rows = append(rows, r)
				}
			}
			inTurn := false
			for _, r := range rows {
				if r.kind != OpenCompaction {
					inTurn = true
				}
			}
			if !turnOpen && inTurn {
				continue // items of a turn need their turn open
			}
			name := fmt.Sprintf("mask=%07b/turn=%v", mask, turnOpen)
			t.Run(name, func(t *testing.T) {
				lines := []string{"session/created"}
				if turnOpen {
					lines = append(lines, "turn/started turn=t1")
				}
				var want []string
				for _, r := range rows {
					lines = append(lines, r.open("1")...)
					want = append(want, r.closer)
				}
				if turnOpen {
					want = append(want, "turn/ended interrupted")
				}
				s, err := repairFold(t, lines)
				if err != nil {
					t.Fatalf("fold: %v", err)
				}
				plan := PlanRepair(s, RepairOptions{Now: repairTestNow})
				if len(want) == 0 {
					if plan != nil {
						t.Fatalf("nothing open, got a plan of %d events", len(plan))
					}
					return
				}
				if len(plan) != len(want)+2 {
					t.Fatalf("plan has %d events, want %d", len(plan), len(want)+2)
				}
				if plan[0].Type != schema.TypeRepairApplied || plan[len(plan)-1].Type != schema.TypeSessionPaused {
					t.Fatalf("plan starts with %s and ends with %s", plan[0].Type, plan[len(plan)-1].Type)
				}
				var got []string
				for i := 1; i < len(plan)-1; i++ {
					got = append(got, repairCloserOf(&plan[i]))
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("closers\n got %v\nwant %v", got, want)
				}
				var ra schema.RepairApplied
				if err := plan[0].DecodeData(&ra); err != nil {
					t.Fatal(err)
				}
				if len(ra.Closed) != len(want) || ra.PlannedAtSeq != s.LastSeq {
					t.Fatalf("repair/applied lists %d closed (want %d), plannedAtSeq %d (want %d)", len(ra.Closed), len(want), ra.PlannedAtSeq, s.LastSeq)
				}
				for i := range plan {
					e := &plan[i]
					if e.Seq != s.LastSeq+1+uint64(i) || !e.Synthetic || e.EventID != RepairEventID(s.LastSeq, i, false) || e.SessionID != "s-1" {
						t.Fatalf("event %d: seq %d synthetic %v id %s session %s", i, e.Seq, e.Synthetic, e.EventID, e.SessionID)
					}
				}
				after, err := repairCheckPlan(t, s, plan)
				if err != nil {
					t.Fatal(err)
				}
				if after.HasOpenWork() || !after.Paused {
					t.Fatalf("after repair: open work %v, paused %v", after.OpenWork(), after.Paused)
				}
				if again := PlanRepair(after, RepairOptions{Now: repairTestNow}); again != nil {
					t.Fatalf("a repaired session planned again: %d events", len(again))
				}
				// Deterministic: the same state plans the same events (but time).
				again := PlanRepair(s, RepairOptions{Now: repairTestNow.Add(time.Hour)})
				for i := range plan {
					if again[i].EventID != plan[i].EventID || string(again[i].Data) != string(plan[i].Data) {
						t.Fatalf("event %d differs between two plans of one state", i)
					}
				}
				// After the repair the session refuses a new turn until resumed.
				next := schema.Envelope{Type: schema.TypeTurnStarted, TurnID: "t9"}
				if err := after.Check(&next); schema.CodeOf(err) != schema.CodePaused {
					t.Fatalf("turn/started after repair: %v, want paused", err)
				}
				resumed := schema.Envelope{Type: schema.TypeSessionResumed, Data: json.RawMessage(`{"by":"op"}`)}
				if err := after.Apply(&resumed); err != nil {
					t.Fatalf("session/resumed: %v", err)
				}
				if err := after.Check(&next); err != nil {
					t.Fatalf("turn/started after resume: %v", err)
				}
			})
		}
	}
}

// TestRepairPlannedAgainstOlderStateDiffers: plans made against different
// tails never share event ids, so a stale plan cannot deduplicate into a
// newer repair.
func TestRepairPlannedAgainstOlderStateDiffers(t *testing.T) {
	s, err := repairFold(t, []string{"session/created", "turn/started turn=t1"})
	if err != nil {
		t.Fatal(err)
	}
	p1 := PlanRepair(s, RepairOptions{Now: repairTestNow})
	e := repairParseEvent(t, `message/user turn=t1 {"content":"hi"}`)
	if err := s.Apply(&e); err != nil {
		t.Fatal(err)
	}
	p2 := PlanRepair(s, RepairOptions{Now: repairTestNow})
	seen := map[string]bool{}
	for _, e := range p1 {
		seen[e.EventID] = true
	}
	for _, e := range p2 {
		if seen[e.EventID] {
			t.Fatalf("event id %s in plans against seq %d and %d", e.EventID, p1[0].Seq-1, p2[0].Seq-1)
		}
	}
	keep := PlanRepair(s, RepairOptions{Now: repairTestNow, KeepApprovalsPending: true})
	if keep[0].EventID == p2[0].EventID {
		t.Fatalf("plans with different approval handling share event id %s", keep[0].EventID)
	}
}

func TestRepairNilAndClosed(t *testing.T) {
	if PlanRepair(nil, RepairOptions{}) != nil || PlanRepair(New("s-1"), RepairOptions{}) != nil {
		t.Fatal("a session without events has nothing to repair")
	}
	s, err := repairFold(t, []string{"session/created", "turn/started turn=t1", `session/closed {"reason":"done"}`})
	if err != nil {
		t.Fatal(err)
	}
	if p := PlanRepair(s, RepairOptions{}); p != nil {
		t.Fatalf("a closed session accepts nothing, got a plan of %d", len(p))
	}
	// A fork child mid-copy with a turn open in the copied part: the
	// forker owns it; a repair would make the copy unfinishable.
	child := New("child")
	for i, e := range []schema.Envelope{
		{Type: schema.TypeSessionCreated, Synthetic: true, Data: []byte(`{"parent":{"sessionId":"p","seedLength":5,"depth":1}}`)},
		{Type: schema.TypeTurnStarted, TurnID: "t1", Synthetic: true, Data: []byte(`{}`)},
	} {
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID = 1, "child", uint64(i+1), fmt.Sprintf("f%d", i)
		if err := child.Apply(&e); err != nil {
			t.Fatal(err)
		}
	}
	if !child.Forking || child.Turn == nil {
		t.Fatalf("setup: forking=%v turn=%v", child.Forking, child.Turn)
	}
	if p := PlanRepair(child, RepairOptions{}); p != nil {
		t.Fatalf("a fork child being copied must not be repaired, got a plan of %d", len(p))
	}
}
