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
)

// A projector folding a session whose stored chain is broken stops it: a
// body changed is unreadable, with the hash chain's reason; an event
// deleted in the middle or two swapped leave a gap. A whole session
// folds.
func TestChainBreakProjector(t *testing.T) {
	e := newEnv(t)
	for _, how := range append([]string{"whole"}, natstest.BreakKinds...) {
		id := "chain-" + how
		s := gen.NewSession(id, t0)
		evs := make([]schema.Envelope, 5)
		for i := range evs {
			evs[i] = s.Next()
		}
		if _, err := e.ls.Append(e.ctx, logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
		if how != "whole" {
			natstest.BreakChain(t, e.nc, "SESSIONS", logstore.SubjectPrefix+id, how)
		}
	}
	r := e.start(t.TempDir())
	r.waitReady(t)
	r.waitSession(t, "chain-whole", func(d httpapi.Detail) bool { return d.LastSeq == 5 && d.Problem == nil })
	for how, want := range map[string]string{natstest.BreakDelete: projector.StatusGap, natstest.BreakChange: projector.StatusUnreadable, natstest.BreakSwap: projector.StatusGap} {
		d := r.waitSession(t, "chain-"+how, func(d httpapi.Detail) bool { return d.Problem != nil })
		if d.Status != want || (how == natstest.BreakChange && !strings.Contains(d.Problem.Message, "hash chain broken at seq 2")) {
			t.Errorf("%s: status %s problem %+v, want %s", how, d.Status, d.Problem, want)
		}
		t.Logf("%s: %s %+v", how, d.Status, d.Problem)
	}
}
