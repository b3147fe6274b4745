package projector_test

import (
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// A projector folding a session whose stored chain is broken stops it: a
// body changed is unreadable, with the hash chain's reason; an event
// deleted in the middle or two swapped leave a gap. A whole session
// folds. Alike with sealed bodies, which the tamper opens and seals again
// with the session's key; a sealed body changed without the key is
// unreadable too, but because it does not open (no link of the chain to
// judge).
func TestChainBreakProjector(t *testing.T) { natstest.ForEachSealing(t, testChainBreakProjector) }

func testChainBreakProjector(t *testing.T, sealed bool) {
	e := projectortest.NewEnv(t)
	ws, err := logstore.Open(e.Ctx, e.NC, logstore.Config{SealBodies: sealed})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{tamper.BreakDelete: projector.StatusGap, tamper.BreakChange: projector.StatusUnreadable, tamper.BreakSwap: projector.StatusGap}
	kinds := tamper.BreakKinds
	if sealed {
		kinds = append(kinds, tamper.BreakGarble)
		want[tamper.BreakGarble] = projector.StatusUnreadable
	}
	for _, how := range append([]string{"whole"}, kinds...) {
		id := "chain-" + how
		s := gen.NewSession(id, projectortest.T0)
		evs := make([]schema.Envelope, 5)
		for i := range evs {
			evs[i] = s.Next()
		}
		if _, err := ws.Append(e.Ctx, logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
		if how != "whole" {
			tamper.BreakChain(t, e.NC, "SESSIONS", logstore.SubjectPrefix+id, how)
		}
		if got := tamper.Sealed(t, e.NC, "SESSIONS", logstore.SubjectPrefix+id); got != sealed {
			t.Fatalf("%s: stored sealed %v, want %v", how, got, sealed)
		}
	}
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	r.WaitSession(t, "chain-whole", func(d httpapi.Detail) bool { return d.LastSeq == 5 && d.Problem == nil })
	for how, want := range want {
		d := r.WaitSession(t, "chain-"+how, func(d httpapi.Detail) bool { return d.Problem != nil })
		if d.Status != want || (how == tamper.BreakChange && !strings.Contains(d.Problem.Message, "hash chain broken at seq 2")) ||
			(how == tamper.BreakGarble && (d.LastSeq != 1 || !strings.Contains(d.Problem.Message, "does not open"))) {
			t.Errorf("%s: status %s lastSeq %d problem %+v, want %s", how, d.Status, d.LastSeq, d.Problem, want)
		}
		t.Logf("%s: %s %+v", how, d.Status, d.Problem)
	}
}
