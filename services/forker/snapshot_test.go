package forker

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/snapshottest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// turns appends whole turns t<from>..t<to> (started, a user message,
// ended) to a session, created first when it has no events.
func (e *env) turns(sid string, from, to int) {
	e.t.Helper()
	var lines []string
	if !e.state(sid).Exists() {
		lines = append(lines, "session/created")
	}
	for i := from; i <= to; i++ {
		lines = append(lines, fmt.Sprintf("turn/started turn=t%d", i), fmt.Sprintf("message/user turn=t%d", i), fmt.Sprintf("turn/ended turn=t%d", i))
		if len(lines) >= schema.MaxBatchEvents-3 {
			e.appendLines(sid, lines...)
			lines = nil
		}
	}
	if len(lines) > 0 {
		e.appendLines(sid, lines...)
	}
}

// snapshotByWriter stores a snapshot of each session at a message the
// writer appends (snapshottest.ByWriter).
func (e *env) snapshotByWriter(sids ...string) map[string]logstore.SnapshotHead {
	e.t.Helper()
	heads := map[string]logstore.SnapshotHead{}
	for sid, h := range snapshottest.ByWriter(e.t, e.st, e.nc, sids...) {
		heads[sid] = *h
	}
	return heads
}

func counterOf(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A parent with a snapshot (written by the writer) is scanned from it:
// the cut is resolved from the events after the snapshot alone
// (sessionlog_forker_scan_events_total), and the child is the parent's
// exact copy, whether the copy takes the scanned bodies or reads the
// parent again. A cut before the snapshot, or one the events after it
// cannot resolve, is resolved by a scan from the start, with the same
// answer as a forker that never reads snapshots.
func TestForkScansOnlyTheEventsAfterTheSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	e.turns("p", 1, 400) // seqs 1..1201
	// p2's snapshot is inside a turn (seq 454): no safe seq after it.
	e.turns("p2", 1, 150)
	e.appendLines("p2", "turn/started turn=long", "message/user turn=long")
	head := e.snapshotByWriter("p", "p2")["p"]
	e.appendLines("p2", "message/user turn=long")
	if head.Seq != 1202 {
		t.Fatalf("snapshot at seq %d", head.Seq)
	}
	e.turns("p", 401, 410)                                                 // 1203..1232
	e.appendLines("p", "turn/started turn=open", "message/user turn=open") // 1233, 1234
	const after = 32
	reread := e.startForker(func(c *Config) { c.ScanBodyBudget = -1 })
	full := e.startForker(func(c *Config) { c.NoSnapshots = true })
	scanned := func(s *Service) float64 { return counterOf(t, s.m.scanned) }
	used := func(s *Service, res string) float64 { return counterOf(t, s.m.snapLoads.WithLabelValues(res)) }

	for _, tc := range []struct {
		name    string
		svc     *Service
		at      *At
		want    uint64
		scanned float64 // events the scan folds
		result  string  // snapshot loads counted
	}{
		{"Default", e.svc, nil, 1232, after, "used"},
		{"SeqAfterReread", reread, &At{Seq: seqp(1205)}, 1205, 3, "used"},
		// Decided once one event is folded past the cut.
		{"SeqAtSnapshot", e.svc, &At{Seq: seqp(1202)}, 1202, 1, "used"},
		{"SeqBefore", e.svc, &At{Seq: seqp(301)}, 301, 301, "past_cut"},
		// t5 ended before the snapshot: the events after it do not know
		// the turn, and a scan from the start finds it.
		{"TurnBefore", e.svc, &At{TurnID: "t5"}, 16, after + 16, "used"},
		{"TurnAfter", reread, &At{TurnID: "t405"}, 1217, 15, "used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s0, u0 := scanned(tc.svc), used(tc.svc, tc.result)
			child := "c-" + strings.ToLower(tc.name)
			r, err := tc.svc.Fork(e.ctx, Request{ParentID: "p", ChildID: child, At: tc.at})
			if err != nil || r.SeedLength != tc.want {
				t.Fatalf("fork: %+v %v, want seed length %d", r, err, tc.want)
			}
			if got := scanned(tc.svc) - s0; got != tc.scanned {
				t.Fatalf("the scan folded %v events, want %v", got, tc.scanned)
			}
			if got := used(tc.svc, tc.result) - u0; got != 1 {
				t.Fatalf("snapshot loads %s: %v, want 1", tc.result, got)
			}
			e.checkChild(child, "p", tc.want, 1)
		})
	}

	// An unsafe cut (inside the open turn) is refused as a forker that
	// scans from the start refuses it, nearest safe seq included, from
	// the events after the snapshot.
	s0 := scanned(e.svc)
	_, err := e.svc.Fork(e.ctx, Request{ParentID: "p", ChildID: "c-unsafe", At: &At{Seq: seqp(1234)}})
	if got := scanned(e.svc) - s0; got != after {
		t.Fatalf("the refused cut folded %v events, want %d", got, after)
	}
	_, want := full.Fork(e.ctx, Request{ParentID: "p", ChildID: "c-unsafe", At: &At{Seq: seqp(1234)}})
	if se := wantCode(t, err, schema.CodeUnsafeCut); se.Error() != want.Error() || se.NearestSafeBefore == nil || *se.NearestSafeBefore != 1232 {
		t.Fatalf("unsafe cut: %v, without snapshots %v", err, want)
	}
	e.noChild("c-unsafe")

	// One whose nearest safe seq is before the snapshot is refused from a
	// scan from the start, as by a forker that never reads snapshots.
	_, err = e.svc.Fork(e.ctx, Request{ParentID: "p2", ChildID: "c-unsafe", At: &At{Seq: seqp(455)}})
	_, want = full.Fork(e.ctx, Request{ParentID: "p2", ChildID: "c-unsafe", At: &At{Seq: seqp(455)}})
	if se := wantCode(t, err, schema.CodeUnsafeCut); se.Error() != want.Error() || se.NearestSafeBefore == nil || *se.NearestSafeBefore != 451 {
		t.Fatalf("unsafe cut: %v, without snapshots %v", err, want)
	}
	e.noChild("c-unsafe")
}

// A snapshot that does not match the log is ignored with a log line: the
// parent is scanned from its start and the child is its exact copy.
func TestForkIgnoresASnapshotThatDisagreesWithTheLog(t *testing.T) {
	e := newEnv(t, nil)
	cases := map[string]func(h *logstore.SnapshotHead){
		"streamSeq": func(h *logstore.SnapshotHead) { h.StreamSeq-- },
		"hash":      func(h *logstore.SnapshotHead) { h.Hash = logstore.ChainHash([]byte("another body")) },
		"version":   func(h *logstore.SnapshotHead) { h.Version += "-next" },
		"state":     func(h *logstore.SnapshotHead) { h.State.Sum++ },
	}
	var sids []string
	for name := range cases {
		sids = append(sids, "p-"+name)
		e.turns("p-"+name, 1, 150) // 451 events, the writer's 452nd
	}
	heads := e.snapshotByWriter(sids...)
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			sid := "p-" + name
			h := heads[sid]
			spoil(&h)
			if err := e.st.PutSnapshotHead(e.ctx, sid, h); err != nil {
				t.Fatal(err)
			}
			e.turns(sid, 151, 152)
			s0, i0 := counterOf(t, e.svc.m.scanned), counterOf(t, e.svc.m.snapLoads.WithLabelValues("ignored"))
			r, err := e.svc.Fork(e.ctx, Request{ParentID: sid, ChildID: "c-" + name})
			if err != nil || r.SeedLength != 458 {
				t.Fatalf("fork: %+v %v", r, err)
			}
			if got := counterOf(t, e.svc.m.scanned) - s0; got != 458 {
				t.Fatalf("the scan folded %v events, want all 458", got)
			}
			if got := counterOf(t, e.svc.m.snapLoads.WithLabelValues("ignored")) - i0; got != 1 {
				t.Fatalf("snapshot ignored %v times", got)
			}
			e.checkChild("c-"+name, sid, 458, 1)
		})
	}
}

// No message escapes the judge because of a snapshot: one stored around
// the writer after it refuses the fork with the verdict every reader
// gives (nothing written), and a hole before it (a message lost after
// the writer judged it) is found by the copy, which judges every event it
// copies: the fork fails with that verdict and the child is abandoned,
// never left holding a copy past the hole.
func TestForkJudgesEveryMessageWithASnapshot(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BatchSize = 100 })
	e.turns("p-around", 1, 100)
	e.turns("p-hole", 1, 100)
	e.snapshotByWriter("p-around", "p-hole")

	e.turns("p-around", 101, 101)
	e.publishAround("p-around", envelopeOf("p-around", 310, "forged", schema.TypeMessageUser, "", `{"content":"forged"}`), 310)
	want := e.st.FirstUnreadable(e.ctx, "p-around")
	_, err := e.svc.Fork(e.ctx, Request{ParentID: "p-around", ChildID: "c-around"})
	if schema.CodeOf(err) != schema.CodeUnreadable || !strings.Contains(err.Error(), want.Error()) {
		t.Fatalf("fork: %v, want %v", err, want)
	}
	e.noChild("c-around")

	// The parent's seq 150 is lost from the stream.
	evs := e.events("p-hole")
	loc, _ := e.st.Locate("p-hole")
	stream, err := natstest.JetStream(t, e.nc).Stream(e.ctx, loc.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(e.ctx, evs[149].StreamSeq); err != nil {
		t.Fatal(err)
	}
	want = e.st.FirstUnreadable(e.ctx, "p-hole")
	var ue *logstore.UnreadableError
	if !errors.As(want, &ue) || ue.Kind != logstore.KindGap {
		t.Fatalf("judged %v, want a gap", want)
	}
	u0 := counterOf(t, e.svc.m.snapLoads.WithLabelValues("used"))
	_, err = e.svc.Fork(e.ctx, Request{ParentID: "p-hole", ChildID: "c-hole"})
	if schema.CodeOf(err) != schema.CodeUnreadable || !strings.Contains(err.Error(), want.Error()) {
		t.Fatalf("fork: %v, want %v", err, want)
	}
	if got := counterOf(t, e.svc.m.snapLoads.WithLabelValues("used")) - u0; got != 1 {
		t.Fatalf("snapshot used %v times", got)
	}
	// Batches of 100: seqs 1..100 were copied before the hole was found.
	if st := e.state("c-hole"); !st.Closed || st.CloseReason != AbandonReason || st.LastSeq > 150 {
		t.Fatalf("child left: last seq %d, closed %v (%s)", st.LastSeq, st.Closed, st.CloseReason)
	}
	e.noRecord("c-hole")
}
