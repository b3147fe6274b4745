package session

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// views is what the read models and a recovering client read of a state:
// everything but the closed items of the turns before the last.
func views(s *State) string {
	type tool struct {
		ID, TurnID, Name, Phase, Status string
		StartSeq, StartedSeq, EndSeq    uint64
		Idempotent                      bool
	}
	v := struct {
		LastSeq                  uint64
		Turn, LastTurn           *Turn
		Turns                    int
		OpenWork                 []OpenItem
		HasOpenWork              bool
		LastTurnTools, OpenTools []tool
		Approvals                []Approval
		Compacted                *Compaction
		Goal                     *Goal
	}{LastSeq: s.LastSeq, Turn: s.Turn, LastTurn: s.LastTurn, Turns: s.Turns, OpenWork: s.OpenWork(), HasOpenWork: s.HasOpenWork(), Compacted: s.Compacted, Goal: s.Goal}
	for _, it := range v.OpenWork {
		if t, ok := s.Tools[it.ID]; ok {
			v.OpenTools = append(v.OpenTools, tool{t.ID, t.TurnID, t.Name, t.Phase, t.Status, t.StartSeq, t.StartedSeq, t.EndSeq, t.Idempotent})
		}
	}
	for _, t := range s.Tools {
		if s.LastTurn != nil && t.TurnID == s.LastTurn.ID {
			v.LastTurnTools = append(v.LastTurnTools, tool{t.ID, t.TurnID, t.Name, t.Phase, t.Status, t.StartSeq, t.StartedSeq, t.EndSeq, t.Idempotent})
		}
	}
	for _, a := range s.Approvals {
		if a.Open() || (s.LastTurn != nil && a.TurnID == s.LastTurn.ID) {
			v.Approvals = append(v.Approvals, *a)
		}
	}
	sort.Slice(v.LastTurnTools, func(i, j int) bool { return v.LastTurnTools[i].ID < v.LastTurnTools[j].ID })
	sort.Slice(v.Approvals, func(i, j int) bool { return v.Approvals[i].ID < v.Approvals[j].ID })
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A long session: turns of five tool calls (each requested, started and
// given a result), two attempts and an approval on a call, until 10,000
// tool calls are closed. Folded with closed items spent it gives the
// views of the fold that keeps every item, refuses every reuse of an old
// id as that fold does, with the same words, and its state keeps in full
// only the last two turns' items: what it holds of the turns before is a
// few bytes per tool call and approval (measured on its JSON, which is
// also what a snapshot stores, and on its maps).
func TestLongSessionSpendsClosedItems(t *testing.T) {
	const calls, perTurn = 10_000, 5
	s, ref := New("s-long"), New("s-long")
	ref.keepSpent = true
	apply := func(line string) {
		t.Helper()
		for _, st := range []*State{s, ref} {
			e := sessiontest.Event(t, line)
			e.SessionID, e.EventID = st.SessionID, fmt.Sprintf("e%d", st.LastSeq+1)
			e.Time = time.Date(2026, 12, 4, 0, 0, 0, int(st.LastSeq), time.UTC)
			if err := st.Apply(e); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
	}
	// Every reuse of an old id is refused by both folds in the same words.
	refusals := func(turn string, n int) {
		t.Helper()
		old := func(k int) string { return fmt.Sprintf("c%d", k) }
		for _, line := range []string{
			"tool/requested turn=" + turn + " call=" + old(0),
			"tool/started turn=" + turn + " call=" + old(n/2),
			"tool/result turn=" + turn + " call=" + old(n/3) + " status=error",
			"tool/result turn=" + turn + " call=" + old(n-1) + " status=not_started",
			"approval/requested turn=" + turn + " approvalId=ap0",
			"approval/requested turn=" + turn + " approvalId=apx toolCallId=" + old(7),
			"approval/decided turn=" + turn + " approvalId=ap1",
			"attempt/started turn=" + turn + " attempt=a1",
			"message/assistant turn=" + turn + " attempt=a2",
		} {
			e := sessiontest.Event(t, line)
			got, want := s.Check(e), ref.Check(e)
			// The same refusal; its words may differ where the keeping
			// fold names what only it keeps (an old call's turn).
			if (got == nil) != (want == nil) || got != nil && (schema.CodeOf(got) != schema.CodeOf(want) || !strings.Contains(got.Error(), idOf(e))) {
				t.Fatalf("%s: refused %v, the keeping fold %v", line, got, want)
			}
		}
	}
	apply(`session/created title=long`)
	var sizeAt100 int
	n := 0
	for turn := 1; n < calls; turn++ {
		tid := fmt.Sprintf("t%d", turn)
		apply("turn/started turn=" + tid)
		apply("attempt/started turn=" + tid + " attempt=a1")
		apply("attempt/interrupted turn=" + tid + " attempt=a1")
		apply("attempt/started turn=" + tid + " attempt=a2")
		apply("message/assistant turn=" + tid + " attempt=a2")
		for range perTurn {
			c := fmt.Sprintf("c%d", n)
			apply("tool/requested turn=" + tid + " call=" + c)
			apply("tool/started turn=" + tid + " call=" + c)
			apply("tool/result turn=" + tid + " call=" + c + " status=ok")
			n++
		}
		apply(fmt.Sprintf("approval/requested turn=%s approvalId=ap%d toolCallId=c%d", tid, turn, n-1))
		apply(fmt.Sprintf("approval/decided turn=%s approvalId=ap%d", tid, turn))
		if turn > 2 {
			refusals(tid, n)
		}
		apply("turn/ended turn=" + tid)
		if got, want := views(s), views(ref); got != want {
			t.Fatalf("turn %d: views differ:\n%s\n%s", turn, got, want)
		}
		if turn == 100 {
			sizeAt100 = len(mustJSON(t, s))
		}
	}
	if len(s.Attempts) != 0 || len(s.Tools) != perTurn || len(s.Approvals) != 1 {
		t.Fatalf("held in full: %d attempts, %d tool calls, %d approvals; want those of the last turn only", len(s.Attempts), len(s.Tools), len(s.Approvals))
	}
	if len(s.spentTools) != calls-perTurn {
		t.Fatalf("spent tool calls %d, want %d", len(s.spentTools), calls-perTurn)
	}

	// The state's size: its JSON, whole and per closed tool call past the
	// first 100 turns, against the keeping fold's.
	size, refSize := len(mustJSON(t, s)), len(mustJSON(t, ref))
	perCall := float64(size-sizeAt100) / float64(calls-100*perTurn)
	t.Logf("state JSON %d bytes (%.1f per closed tool call), keeping every item %d bytes", size, perCall, refSize)
	// (A spent call is its hash and seq, 16 bytes, 22 in base64; with a
	// fifth of its turn's approval and used turn id, about 28.)
	if perCall > 32 {
		t.Errorf("the state grows by %.1f bytes per closed tool call; want at most 32", perCall)
	}
	if size*3 > refSize {
		t.Errorf("state %d bytes, not a third of the keeping fold's %d", size, refSize)
	}
	// Decoded, it still refuses the same.
	back, err := UnmarshalState(mustJSON(t, s))
	if err != nil {
		t.Fatal(err)
	}
	s = back
	apply("turn/started turn=tlast")
	refusals("tlast", n)
	if e := sessiontest.Event(t, "tool/requested turn=tlast call=c5"); schema.CodeOf(s.Check(e)) != schema.CodeStructure {
		t.Fatalf("old call id accepted after decode: %v", s.Check(e))
	}
	if !reflect.DeepEqual(views(s), views(ref)) {
		t.Fatal("views differ after decode")
	}
}

// idOf is the item id an event names: its tool call, its approval, or
// its attempt.
func idOf(e *schema.Envelope) string {
	if e.ToolCallID != "" {
		return e.ToolCallID
	}
	if id := dataIDs(e).ApprovalID; id != "" {
		return id
	}
	return e.AttemptID
}

// TestLongSessionStateMemory measures the heap a long session's state
// holds: 10,000 closed tool calls (turns of five, each with an approval)
// cost it a few tens of bytes each, not their ids, turns and outcomes.
func TestLongSessionStateMemory(t *testing.T) {
	const calls, perTurn = 10_000, 5
	var before, after runtime.MemStats
	// Twice: the first collection only moves what sync.Pools hold to
	// their victim caches, which the second frees.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New("s-mem")
	apply := func(e *schema.Envelope) {
		e.SessionID, e.EventID = s.SessionID, fmt.Sprintf("e%d", s.LastSeq+1)
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	apply(sessiontest.Event(t, `session/created title=long`))
	n := 0
	for turn := 1; n < calls; turn++ {
		tid := fmt.Sprintf("turn-%06d", turn)
		apply(sessiontest.Event(t, "turn/started turn="+tid))
		for range perTurn {
			c := fmt.Sprintf("call_%08d", n)
			apply(sessiontest.Event(t, "tool/requested turn="+tid+" call="+c))
			apply(sessiontest.Event(t, "tool/started turn="+tid+" call="+c))
			apply(sessiontest.Event(t, "tool/result turn="+tid+" call="+c+" status=ok"))
			n++
		}
		apply(sessiontest.Event(t, fmt.Sprintf("approval/requested turn=%s approvalId=ap%06d toolCallId=call_%08d", tid, turn, n-1)))
		apply(sessiontest.Event(t, fmt.Sprintf("approval/decided turn=%s approvalId=ap%06d", tid, turn)))
		apply(sessiontest.Event(t, "turn/ended turn="+tid))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	perCall := float64(held) / calls
	t.Logf("state of %d closed tool calls: %d bytes of heap, %.1f per call", calls, held, perCall)
	// A spent call is a map slot of 16 bytes (with its share of the
	// table: about 20), its turn's used id and approval a fifth of that
	// each; the ids themselves are not kept.
	if perCall > 48 {
		t.Errorf("the state holds %.1f bytes of heap per closed tool call; want at most 48", perCall)
	}
	runtime.KeepAlive(s)
}

// The binary form (snapshots) decodes to the state it was made of: the
// same JSON, sets of hashes included, and the same refusals; a truncated
// or foreign input is refused.
func TestStateBinaryRoundTrip(t *testing.T) {
	s := New("s-bin")
	n := 0
	apply := func(line string) {
		t.Helper()
		e := sessiontest.Event(t, line)
		e.SessionID, e.EventID = s.SessionID, fmt.Sprintf("e%d", s.LastSeq+1)
		if err := s.Apply(e); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	apply(`session/created title=binary`)
	for turn := 1; turn <= 50; turn++ {
		tid := fmt.Sprintf("t%d", turn)
		apply("turn/started turn=" + tid)
		c := fmt.Sprintf("c%d", n)
		n++
		apply("tool/requested turn=" + tid + " call=" + c)
		apply("tool/started turn=" + tid + " call=" + c)
		apply("tool/result turn=" + tid + " call=" + c + " status=ok")
		apply(fmt.Sprintf("approval/requested turn=%s approvalId=ap%d toolCallId=%s", tid, turn, c))
		apply(fmt.Sprintf("approval/decided turn=%s approvalId=ap%d", tid, turn))
		apply("turn/ended turn=" + tid)
	}
	apply("turn/started turn=open")
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got State
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, &got), mustJSON(t, s); string(g) != string(w) {
		t.Fatalf("decoded %s\nwant %s", g, w)
	}
	for _, line := range []string{"tool/requested turn=open call=c3", "approval/requested turn=open approvalId=ap2", "turn/started turn=t9"} {
		e := sessiontest.Event(t, line)
		if g, w := got.Check(e), s.Check(e); g == nil || w == nil || g.Error() != w.Error() {
			t.Fatalf("%s: refused %v, want %v", line, g, w)
		}
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(b[:len(b):len(b)], 0), []byte(`{"sessionId":"s"}`)} {
		if err := new(State).UnmarshalBinary(bad); err == nil {
			t.Errorf("%d bytes decoded", len(bad))
		}
	}
}
