package repairer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/snapshottest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

const evUser = `{"type":"message/user","data":{"content":"hi"}}`

// seedLong stores session/created and n-1 user messages, in batches.
func (e *env) seedLong(id string, n int) {
	e.t.Helper()
	lines := []string{evCreated}
	for len(lines) < n {
		lines = append(lines, evUser)
	}
	for i := 0; i < n; i += schema.MaxBatchEvents {
		e.appendEvents(id, lines[i:min(i+schema.MaxBatchEvents, n)]...)
	}
}

// writerSnapshots has a writer snapshot each session
// (snapshottest.ByWriter) and returns each session's head.
func (e *env) writerSnapshots(ids ...string) map[string]*logstore.SnapshotHead {
	e.t.Helper()
	return snapshottest.ByWriter(e.t, e.store, e.nc, ids...)
}

// openAfter appends a turn with a tool call left open and user messages
// in it: the events after the snapshot, which a repair closes. It returns
// how many it appended.
func (e *env) openAfter(id string) int {
	e.t.Helper()
	lines := []string{evTurn}
	for range 20 {
		lines = append(lines, evUser)
	}
	lines = append(lines, evRequested, evStarted)
	e.appendEvents(id, lines...)
	return len(lines)
}

// checkRepaired: the repair closed the open tool call and turn, and the
// whole session, folded from its start, has no open work.
func (e *env) checkRepaired(id string, out Outcome, err error) {
	e.t.Helper()
	if err != nil || !out.Repaired || out.Duplicate {
		e.t.Fatalf("%s: repair %+v, %v", id, out, err)
	}
	var kinds []string
	for _, c := range out.Closed {
		kinds = append(kinds, c.Kind+":"+c.ID)
	}
	if got := strings.Join(kinds, ","); !strings.Contains(got, ":c1") || !strings.Contains(got, ":t1") {
		e.t.Fatalf("%s: closed %s, want the tool call c1 and the turn t1", id, got)
	}
	st := e.fold(id)
	if st.HasOpenWork() || st.LastSeq != out.LastSeq {
		e.t.Fatalf("%s: after the repair open %v, last seq %d (repair's %d)", id, st.OpenWork(), st.LastSeq, out.LastSeq)
	}
}

// A session with a snapshot (written by the writer) is folded from it by
// a repairer that has not cached it: only the events after the snapshot
// are read (sessionlog_repairer_fold_events_total), and the repair closes
// what they left open. Without snapshots the same fold reads every event.
func TestRepairFoldsOnlyTheEventsAfterTheSnapshot(t *testing.T) {
	e := newEnv(t)
	const n = 1_234
	e.seedLong("snap-1", n)
	e.seedLong("snap-2", n)
	heads := e.writerSnapshots("snap-1", "snap-2")
	after := e.openAfter("snap-1")
	e.openAfter("snap-2")

	r := e.start(Config{})
	out, err := r.svc.Repair(context.Background(), "snap-1", false)
	e.checkRepaired("snap-1", out, err)
	if got := counter(t, r.svc.m.folded); got != float64(after) {
		t.Fatalf("the repair read %v events, want the %d after the snapshot at seq %d", got, after, heads["snap-1"].Seq)
	}
	if used := counter(t, r.svc.m.snapLoads.WithLabelValues("used")); used != 1 {
		t.Fatalf("snapshot used %v times", used)
	}

	off := e.start(Config{NoSnapshots: true})
	out, err = off.svc.Repair(context.Background(), "snap-2", false)
	e.checkRepaired("snap-2", out, err)
	if got, want := counter(t, off.svc.m.folded), float64(n+1+after); got != want {
		t.Fatalf("without snapshots the repair read %v events, want %v", got, want)
	}
}

// A snapshot that does not match the log (its stream seq holds another
// message or none, its hash is not the stored body's, its seq is not the
// stored event's, its version is unknown, its state part is not the one
// it names) is ignored with a log line: the repairer folds the session
// from its start and repairs it as well.
func TestRepairIgnoresASnapshotThatDisagreesWithTheLog(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 456
	cases := map[string]func(h *logstore.SnapshotHead){
		"another":  func(h *logstore.SnapshotHead) { h.StreamSeq-- },
		"missing":  func(h *logstore.SnapshotHead) { h.StreamSeq += 1 << 30 },
		"hash":     func(h *logstore.SnapshotHead) { h.Hash = logstore.ChainHash([]byte("another body")) },
		"seq":      func(h *logstore.SnapshotHead) { h.Seq-- },
		"version":  func(h *logstore.SnapshotHead) { h.Version = "state9.reducer9.schema9" },
		"stateSum": func(h *logstore.SnapshotHead) { h.State.Sum++ },
	}
	var ids []string
	for name := range cases {
		ids = append(ids, "bad-"+name)
		e.seedLong("bad-"+name, n)
	}
	heads := e.writerSnapshots(ids...)
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			id := "bad-" + name
			h := *heads[id]
			spoil(&h)
			if err := e.store.PutSnapshotHead(ctx, id, h); err != nil {
				t.Fatal(err)
			}
			after := e.openAfter(id)
			r := e.start(Config{})
			out, err := r.svc.Repair(ctx, id, false)
			e.checkRepaired(id, out, err)
			if got, want := counter(t, r.svc.m.folded), float64(n+1+after); got != want {
				t.Fatalf("the repair read %v events, want all %v", got, want)
			}
			ignored, used := counter(t, r.svc.m.snapLoads.WithLabelValues("ignored")), counter(t, r.svc.m.snapLoads.WithLabelValues("used"))
			if ignored != 1 || used != 0 {
				t.Fatalf("snapshot ignored %v, used %v times", ignored, used)
			}
		})
	}
}

// A message stored around the writer after the snapshot is judged as by
// every other reader: the repair is refused with the judge's verdict.
func TestRepairJudgesTheMessagesAfterTheSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seedLong("snap-around", 321)
	e.writerSnapshots("snap-around")
	e.appendEvents("snap-around", evTurn)
	e.publishAround("snap-around", forged("snap-around", 330), 330)
	want := e.store.FirstUnreadable(ctx, "snap-around")
	var ue *logstore.UnreadableError
	if !errors.As(want, &ue) || ue.Kind != logstore.KindGap {
		t.Fatalf("judged %v, want a gap", want)
	}
	r := e.start(Config{})
	_, err := r.svc.Repair(ctx, "snap-around", true)
	if schema.CodeOf(err) != schema.CodeUnreadable || !strings.Contains(err.Error(), want.Error()) {
		t.Fatalf("repair: %v, want unreadable %q", err, want)
	}
	if used := counter(t, r.svc.m.snapLoads.WithLabelValues("used")); used != 1 {
		t.Fatalf("snapshot used %v times", used)
	}
	if got := counter(t, r.svc.m.folded); got != 1 {
		t.Fatalf("the repair folded %v events, want the one before the bad message", got)
	}
}
