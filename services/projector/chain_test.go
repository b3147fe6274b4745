package projector_test

import (
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// A projector folding a session whose stored chain is broken stops it: a
// body changed is unreadable, with the hash chain's reason; an event
// deleted in the middle or two swapped leave a gap. A whole session
// folds.
func TestChainBreakProjector(t *testing.T) {
	e := projectortest.NewEnv(t)
	for _, how := range append([]string{"whole"}, natstest.BreakKinds...) {
		id := "chain-" + how
		s := gen.NewSession(id, projectortest.T0)
		evs := make([]schema.Envelope, 5)
		for i := range evs {
			evs[i] = s.Next()
		}
		if _, err := e.LS.Append(e.Ctx, logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
		if how != "whole" {
			natstest.BreakChain(t, e.NC, "SESSIONS", logstore.SubjectPrefix+id, how)
		}
	}
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	r.WaitSession(t, "chain-whole", func(d httpapi.Detail) bool { return d.LastSeq == 5 && d.Problem == nil })
	for how, want := range map[string]string{natstest.BreakDelete: projector.StatusGap, natstest.BreakChange: projector.StatusUnreadable, natstest.BreakSwap: projector.StatusGap} {
		d := r.WaitSession(t, "chain-"+how, func(d httpapi.Detail) bool { return d.Problem != nil })
		if d.Status != want || (how == natstest.BreakChange && !strings.Contains(d.Problem.Message, "hash chain broken at seq 2")) {
			t.Errorf("%s: status %s problem %+v, want %s", how, d.Status, d.Problem, want)
		}
		t.Logf("%s: %s %+v", how, d.Status, d.Problem)
	}
}
