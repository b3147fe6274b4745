package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// A reader's fold (NewReader) of a long session gives the views of the
// writer's after every turn and holds no hash of a spent id, so its
// memory is the last turns' items however many turns ended; an id used
// again, which the writer's fold refuses, it folds.
func TestReaderForgetsSpentItems(t *testing.T) {
	w, r := New("s-long"), NewReader("s-long")
	apply := func(line string) {
		t.Helper()
		// The next event of each state: the same id and time in both.
		for _, st := range []*State{w, r} {
			e := sessiontest.Event(t, line)
			e.SessionID, e.EventID, e.Time = st.SessionID, fmt.Sprintf("e%d", st.LastSeq+1), time.Unix(int64(st.LastSeq), 0)
			if err := st.Apply(e); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
	}
	apply(`session/created title=long`)
	for turn := 1; turn <= 200; turn++ {
		for _, line := range turnOfCalls(turn, 3) {
			apply(line)
		}
		if got, want := views(r), views(w); got != want {
			t.Fatalf("turn %d: views differ:\n%s\n%s", turn, got, want)
		}
	}
	if len(r.usedTurns)+len(r.spentTools)+len(r.spentApprovals) != 0 || len(r.Tools) != 3 || len(r.Approvals) != 1 {
		t.Fatalf("the reader holds %d used turns, %d spent calls, %d spent approvals, %d calls, %d approvals; want the last turn's items only",
			len(r.usedTurns), len(r.spentTools), len(r.spentApprovals), len(r.Tools), len(r.Approvals))
	}
	if e := sessiontest.Event(t, "turn/started turn=t1"); w.Check(e) == nil {
		t.Fatal("the writer's fold takes turn id t1 again")
	}
	for _, line := range []string{"turn/started turn=t1", "tool/requested turn=t1 call=c1.0"} {
		e := sessiontest.Event(t, line)
		e.SessionID, e.EventID = r.SessionID, fmt.Sprintf("e%d", r.LastSeq+1)
		if err := r.Apply(e); err != nil {
			t.Fatalf("%s: the reader's fold refuses an id used again: %v", line, err)
		}
	}
}

// turnOfCalls is turn n of a long session: a message, k tool calls, an
// approval of the last, in turn t<n>.
func turnOfCalls(n, k int) []string {
	t := fmt.Sprintf(" turn=t%d", n)
	lines := []string{"turn/started" + t, "attempt/started" + t + " attempt=a1", "message/assistant" + t + " attempt=a1"}
	for i := range k {
		c := fmt.Sprintf(" call=c%d.%d", n, i)
		lines = append(lines, "tool/requested"+t+c, "tool/started"+t+c, "tool/result"+t+c+" status=ok")
	}
	return append(lines, fmt.Sprintf("approval/requested%s approvalId=ap%d toolCallId=c%d.%d", t, n, n, k-1),
		fmt.Sprintf("approval/decided%s approvalId=ap%d", t, n), "turn/ended"+t)
}
