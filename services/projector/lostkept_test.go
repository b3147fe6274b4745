package projector_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// The server forgets what it lost when it restarts; the projector that
// saw its record kept it (SESSION_LOST), once however often it read it,
// so a projector started after two more restarts of the server still
// raises log_rolled_back naming it, until an operator acknowledges it.
func TestLostKeptPastRestarts(t *testing.T) {
	rs := newRollbackServer(t)
	e := rs.e
	projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
	projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)
	rs.stop()
	rs.damage("missing_block")
	rs.restart("a")

	const want = "log_rolled_back: stream SESSIONS: nats-server lost 6 stored messages (seqs 1, 2, 3, 4, 5, …"
	r := e.Start(t.TempDir())
	err := r.Ready()
	t.Logf("started after the loss: ready = %v", err)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("started after the loss: ready = %v, want %q", err, want)
	}
	r.Stop(t)
	// Read again, as each check does while the server keeps its record.
	if _, err := e.LS.StreamLost(e.Ctx, logstore.StreamName); err != nil {
		t.Fatal(err)
	}

	rs.restart("a")
	rs.restart("a")
	if ld, err := e.LS.ServerLost(e.Ctx, logstore.StreamName); err != nil || ld != nil {
		t.Fatalf("the server's record after two restarts: %s (%v), want it forgotten", showLost(ld), err)
	}
	r2 := e.Start(t.TempDir())
	err = r2.Ready()
	t.Logf("started after two more restarts: ready = %v", err)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("started after two more restarts of the server: ready = %v, want %q", err, want)
	}
	r2.Stop(t)

	kept, err := e.LS.LostKept(e.Ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Stream != logstore.StreamName || !slices.Equal(kept[0].Msgs, []uint64{1, 2, 3, 4, 5, 6}) || kept[0].AckedAt != nil {
		t.Fatalf("kept %+v, want one record of SESSIONS naming seqs 1..6", kept)
	}
	acked, err := e.LS.AckLost(e.Ctx, logstore.StreamName, time.Now())
	if err != nil || len(acked) != 1 {
		t.Fatalf("ack: %+v (%v), want the one record", acked, err)
	}
	if ld, err := e.LS.StreamLost(e.Ctx, logstore.StreamName); err != nil || ld != nil {
		t.Fatalf("after the ack: %s (%v), want nothing", showLost(ld), err)
	}
	r3 := e.Start(t.TempDir())
	r3.WaitReady(t)
	r3.Stop(t)
}

// An acknowledged loss the server still keeps a record of (it has not
// restarted since) is not kept anew: the acknowledgement holds.
func TestLostAckedWhileServerKeepsIt(t *testing.T) {
	rs := newRollbackServer(t)
	e := rs.e
	projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
	rs.stop()
	rs.damage("missing_block")
	rs.restart("a")
	ld, err := e.LS.StreamLost(e.Ctx, logstore.StreamName)
	if err != nil || ld == nil {
		t.Fatalf("lost: %s (%v), want the server's record", showLost(ld), err)
	}
	if acked, err := e.LS.AckLost(e.Ctx, "", time.Now()); err != nil || len(acked) != 1 {
		t.Fatalf("ack: %+v (%v), want one record", acked, err)
	}
	if ld, err := e.LS.ServerLost(e.Ctx, logstore.StreamName); err != nil || ld == nil {
		t.Fatalf("the server's record: %s (%v), want it still there", showLost(ld), err)
	}
	if ld, err := e.LS.StreamLost(e.Ctx, logstore.StreamName); err != nil || ld != nil {
		t.Fatalf("after the ack: %s (%v), want nothing", showLost(ld), err)
	}
}

// A later loss the server's record tells with the same bytes as one kept
// and acknowledged (a record of the same size cut the same way, after
// the server restarted) is another recovery's: kept and reported.
func TestLostSameBytesAfterAck(t *testing.T) {
	rs := newRollbackServer(t)
	e := rs.e
	lose := func(early, late string) *logstore.LostData {
		t.Helper()
		projectortest.PublishN(t, e, gen.NewSession(early, projectortest.T0), 3)
		projectortest.PublishN(t, e, gen.NewSession(late, projectortest.T0), 3)
		rs.stop()
		rs.damage("cut_in_record")
		rs.restart("a")
		_, ld := rs.lost()
		return ld
	}
	first := lose("early", "late")
	if ld, err := e.LS.StreamLost(e.Ctx, logstore.StreamName); err != nil || ld == nil {
		t.Fatalf("the first loss: %s (%v), want it", showLost(ld), err)
	}
	if acked, err := e.LS.AckLost(e.Ctx, "", time.Now()); err != nil || len(acked) != 1 {
		t.Fatalf("ack: %+v (%v), want one record", acked, err)
	}
	second := lose("earlx", "latx")
	t.Logf("the server's records: first %s, second %s", showLost(first), showLost(second))
	if first == nil || second == nil || !slices.Equal(first.Msgs, second.Msgs) || first.Bytes != second.Bytes {
		t.Fatalf("the two records differ: not the case tested")
	}
	ld, err := e.LS.StreamLost(e.Ctx, logstore.StreamName)
	if err != nil || ld == nil || ld.Bytes != second.Bytes {
		t.Fatalf("after the second loss: %s (%v), want %s", showLost(ld), err, showLost(second))
	}
}
