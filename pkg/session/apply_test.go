package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// TestRules runs the scripts in testdata/rules. Commands:
//
//	new [id=<sessionId>]      start an empty session (each file starts with s-1)
//	append [novalidate]       one event a line; prints "ok seq=N" or the refusal
//	state                     a compact summary of the state
//
// An event line is JSON (an envelope), or
//
//	<type> [turn=] [step=] [attempt=] [call=] [seq=] [id=] [session=] [synthetic] [ignorable] [<data field>=<value>]...
//
// where a value that parses as JSON is used as is and anything else is a
// string; required data fields the line leaves out get a default. Unless
// novalidate is given, each event first goes through schema.Validate
// (origin service when synthetic), as in the writer: what it refuses
// prints "invalid ..." and is not folded.
//
// Every append also checks, on every event, that Check and Apply agree,
// that Check and a refused Apply leave the state as it was, and that a
// state decoded from the previous state's JSON folds the event to the same
// JSON (so a projector can resume from a stored state).
func TestRules(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "rules"), func(t *testing.T, path string) {
		s := New("s-1")
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "new":
				id := "s-1"
				td.MaybeScanArgs(t, "id", &id)
				s = New(id)
				return ""
			case "append":
				var out strings.Builder
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					e := sessiontest.Event(t, line)
					if !td.HasArg("novalidate") {
						opt := schema.ValidateOptions{}
						if e.Synthetic {
							opt.Origin = schema.OriginService
						}
						if err := schema.Validate(e, opt); err != nil {
							fmt.Fprintf(&out, "invalid %v\n", err)
							continue
						}
					}
					fmt.Fprintln(&out, applyChecked(t, s, e))
				}
				return out.String()
			case "state":
				return summary(s)
			default:
				t.Fatalf("unknown command %q", td.Cmd)
				return ""
			}
		})
	})
}

func mustJSON(t *testing.T, s *State) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyChecked applies e to s and checks the invariants every fold keeps.
func applyChecked(t *testing.T, s *State, e *schema.Envelope) string {
	t.Helper()
	before := mustJSON(t, s)
	clone := s.Clone()
	shadow, err := UnmarshalState(before)
	if err != nil {
		t.Fatal(err)
	}
	checkErr := s.Check(e)
	if got := mustJSON(t, s); !bytes.Equal(got, before) {
		t.Fatalf("Check changed the state:\n%s\n%s", before, got)
	}
	applyErr := s.Apply(e)
	if fmt.Sprint(checkErr) != fmt.Sprint(applyErr) {
		t.Fatalf("Check said %v, Apply said %v", checkErr, applyErr)
	}
	shadowErr := shadow.Apply(e)
	if fmt.Sprint(shadowErr) != fmt.Sprint(applyErr) {
		t.Fatalf("state decoded from JSON said %v, the folded one %v", shadowErr, applyErr)
	}
	if got, want := mustJSON(t, shadow), mustJSON(t, s); !bytes.Equal(got, want) {
		t.Fatalf("state decoded from JSON folds differently:\n got %s\nwant %s", got, want)
	}
	planCommitAgrees(t, before, e, applyErr, mustJSON(t, s))
	if applyErr != nil {
		if got := mustJSON(t, s); !bytes.Equal(got, before) {
			t.Fatalf("refused Apply changed the state:\n%s\n%s", before, got)
		}
		if got := mustJSON(t, clone); !bytes.Equal(got, before) {
			t.Fatalf("clone differs:\n%s\n%s", before, got)
		}
		var se *schema.Error
		if !errors.As(applyErr, &se) {
			t.Fatalf("refusal %v is not a *schema.Error", applyErr)
		}
		return "error " + applyErr.Error()
	}
	return fmt.Sprintf("ok seq=%d", s.LastSeq)
}

// planCommitAgrees checks that Plan then Commit, on the state whose JSON
// is before, says what Apply said (applyErr) and folds e to the JSON want;
// and that a committed plan is not committed again.
func planCommitAgrees(t *testing.T, before []byte, e *schema.Envelope, applyErr error, want []byte) {
	t.Helper()
	s, err := UnmarshalState(before)
	if err != nil {
		t.Fatal(err)
	}
	p, planErr := s.Plan(e)
	if fmt.Sprint(planErr) != fmt.Sprint(applyErr) {
		t.Fatalf("Plan said %v, Apply said %v", planErr, applyErr)
	}
	if planErr == nil {
		if err := s.Commit(p); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if err := s.Commit(p); err == nil {
			t.Fatalf("a plan was committed twice")
		}
	}
	if got := mustJSON(t, s); !bytes.Equal(got, want) {
		t.Fatalf("Plan and Commit fold differently from Apply:\n got %s\nwant %s", got, want)
	}
}

// TestCommitRefusesStalePlan: a plan is committed to the state that made
// it, as it was; otherwise Commit refuses it and changes nothing.
func TestCommitRefusesStalePlan(t *testing.T) {
	s := New("s-1")
	fold(t, s, []string{"session/created", "turn/started turn=t1"})
	p, err := s.Plan(sessiontest.Event(t, "tool/requested turn=t1 call=c1"))
	if err != nil {
		t.Fatal(err)
	}
	other := s.Clone()
	for _, tc := range []struct {
		name string
		s    *State
		p    Plan
	}{{"OtherState", other, p}, {"ZeroPlan", s, Plan{}}} {
		t.Run(tc.name, func(t *testing.T) {
			before := mustJSON(t, tc.s)
			err := tc.s.Commit(tc.p)
			if schema.CodeOf(err) != schema.CodeStructure {
				t.Fatalf("Commit = %v, want a structure error", err)
			}
			if got := mustJSON(t, tc.s); !bytes.Equal(got, before) {
				t.Fatalf("a refused Commit changed the state")
			}
		})
	}
	t.Run("StateMoved", func(t *testing.T) {
		fold(t, s, []string{"message/user turn=t1"})
		before := mustJSON(t, s)
		err := s.Commit(p)
		if want := "a plan made at seq 2 is committed to a state at seq 3"; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Commit = %v, want %q", err, want)
		}
		if got := mustJSON(t, s); !bytes.Equal(got, before) {
			t.Fatalf("a refused Commit changed the state")
		}
	})
}

// summary is a compact, deterministic rendering of what the rules depend on.
func summary(s *State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lastSeq=%d turns=%d", s.LastSeq, s.Turns)
	for _, f := range []struct {
		on   bool
		name string
	}{{s.Paused, "paused(" + s.PauseReason + ")"}, {s.Closed, "closed(" + s.CloseReason + ")"}, {s.Forking, "forking"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	b.WriteString("\n")
	if s.Meta.Parent != nil {
		p := s.Meta.Parent
		fmt.Fprintf(&b, "parent: %s seedLength=%d depth=%d", p.SessionID, p.SeedLength, p.Depth)
		if s.ForkCommittedSeq > 0 {
			fmt.Fprintf(&b, " committed@%d", s.ForkCommittedSeq)
		}
		b.WriteString("\n")
	}
	if s.Turn != nil {
		fmt.Fprintf(&b, "turn: %s @%d\n", s.Turn.ID, s.Turn.StartSeq)
	} else {
		b.WriteString("turn: none\n")
	}
	if s.LastTurn != nil {
		fmt.Fprintf(&b, "lastTurn: %s @%d-%d %s\n", s.LastTurn.ID, s.LastTurn.StartSeq, s.LastTurn.EndSeq, s.LastTurn.Reason)
	}
	for _, it := range s.OpenWork() {
		fmt.Fprintf(&b, "open: %s %s", it.Kind, it.ID)
		if it.TurnID != "" {
			fmt.Fprintf(&b, " turn=%s", it.TurnID)
		}
		fmt.Fprintf(&b, " @%d", it.StartSeq)
		if it.Idempotent {
			b.WriteString(" idempotent")
		}
		b.WriteString("\n")
	}
	if len(s.Tools) > 0 {
		ids := slices.Sorted(maps.Keys(s.Tools))
		b.WriteString("tools:")
		for _, id := range ids {
			tc := s.Tools[id]
			fmt.Fprintf(&b, " %s=%s", id, tc.Phase)
			if tc.Status != "" {
				fmt.Fprintf(&b, "/%s", tc.Status)
			}
		}
		b.WriteString("\n")
	}
	if n := len(s.spentTools); n > 0 {
		fmt.Fprintf(&b, "spent tools: %d\n", n)
	}
	if s.Goal != nil {
		fmt.Fprintf(&b, "goal: revision=%d status=%s @%d\n", s.Goal.Revision, s.Goal.Status, s.Goal.Seq)
	}
	if s.Compacted != nil {
		fmt.Fprintf(&b, "compacted: %s through=%d @%d\n", s.Compacted.ID, s.Compacted.ThroughSeq, s.Compacted.EndSeq)
	}
	if r := s.LastRewind; r != nil {
		fmt.Fprintf(&b, "rewinds=%d last: @%d to %d (%s)\n", s.Rewinds, r.Seq, r.ToSeq, r.ToEventID)
	}
	if s.Meta.Title != "" {
		fmt.Fprintf(&b, "title: %s\n", s.Meta.Title)
	}
	if s.Repairs > 0 {
		fmt.Fprintf(&b, "repairs=%d last@%d\n", s.Repairs, s.LastRepairSeq)
	}
	fmt.Fprintf(&b, "hasOpenWork=%t\n", s.HasOpenWork())
	return b.String()
}
