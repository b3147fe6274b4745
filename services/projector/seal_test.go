package projector_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestSealedBodyThatDoesNotOpen: a sealed body that does not open with
// its session's key (changed in the store, or stored around the writer)
// makes its session unreadable, as a body that does not decode does; the
// projector goes on with the stream (a follower that failed on it stopped
// the projector's consume at that message on every start).
func TestSealedBodyThatDoesNotOpen(t *testing.T) {
	e := projectortest.NewEnv(t)
	ws, err := logstore.Open(e.Ctx, e.NC, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(id string, s *gen.Session, n int) {
		t.Helper()
		evs := make([]schema.Envelope, n)
		for i := range evs {
			evs[i] = s.Next()
		}
		if _, err := ws.Append(e.Ctx, logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	bad := gen.NewSession("seal-bad", projectortest.T0)
	appendN("seal-bad", bad, 3)
	// A fourth event sealed, but not with the session's key: it does not
	// open.
	m := nats.NewMsg(logstore.SubjectPrefix + "seal-bad")
	m.Header.Set(logstore.HeaderMsgID, "seal-bad:forged-4")
	m.Header.Set(logstore.HeaderSeq, "4")
	m.Header.Set(logstore.HeaderSeal, logstore.SealVersion)
	m.Data = make([]byte, 100)
	if _, err := natstest.JetStream(t, e.NC).PublishMsg(e.Ctx, m); err != nil {
		t.Fatal(err)
	}
	appendN("seal-after", gen.NewSession("seal-after", projectortest.T0), 2)

	r := e.Start(t.TempDir())
	r.WaitReady(t)
	r.WaitSession(t, "seal-after", func(d httpapi.Detail) bool { return d.LastSeq == 2 && d.Problem == nil })
	d := r.WaitSession(t, "seal-bad", func(d httpapi.Detail) bool { return d.Problem != nil })
	if d.Status != projector.StatusUnreadable || d.LastSeq != 3 || !strings.Contains(d.Problem.Message, "does not open") {
		t.Errorf("seal-bad: status %s lastSeq %d problem %+v, want %s at 3, its seal not opening", d.Status, d.LastSeq, d.Problem, projector.StatusUnreadable)
	}
}
