package forker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

var (
	_ Log     = (*memlog.Log)(nil)
	_ Records = (*memlog.ForkRecords)(nil)
)

// TestScripts runs the scripts in testdata/fork on the in-memory log and
// on logstore over an embedded NATS server (scripttest.Run): the same
// output on both. Commands (id= names a session, default p):
//
//	append [id=]          the input's events (sessiontest's short form)
//	                      after the session's tail, in one batch
//	fork child=C [parent=] [seq=N] [turn=T] [workspace=W]
//	                      sessions.api.fork as an operator asks it
//	                      (Service.Fork): the reply, or the refusal with
//	                      its nearest safe seqs
//	crashed [id=] child=C seed=K [copied=N] [fresh]
//	                      what a forker that crashed copying id's first K
//	                      events into C leaves: its record (renewed an
//	                      hour ago; fresh: now) and the child's first N
//	                      events
//	sweep                 one sweep of the copies in flight (Sweep)
//	erase [id=] [accepted]
//	                      the session is erased: its erasure record
//	                      written, its events deleted; accepted: only
//	                      the record is written (the job has not run)
//	records               the fork records left (copies in flight)
//	show [id=]            the session as the log judges it
func TestScripts(t *testing.T) {
	// Three partitions: parent p (partition 2) and children such as
	// c-default and c-one (partition 1) live in different streams.
	scripttest.Run(t, filepath.Join("testdata", "fork"), logstore.Config{Partitions: 3}, "p", func(t *testing.T, b *scripttest.Backend) scripttest.Commands {
		// Batches of three events: a copy takes several appends, each
		// expecting the last.
		svc, err := New(Config{Store: b.Log.(Log), Conn: b.Conn, NewID: func() string { return "c-new" }, BatchSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if b.Mem != nil {
			svc.useRecords(b.Mem.ForkRecords())
		} else if err := svc.openBucket(ctx); err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T, td *datadriven.TestData, id string) string {
			switch td.Cmd {
			case "fork":
				r := Request{ParentID: "p"}
				td.MaybeScanArgs(t, "parent", &r.ParentID)
				td.MaybeScanArgs(t, "child", &r.ChildID)
				td.MaybeScanArgs(t, "workspace", &r.Workspace)
				if td.HasArg("seq") {
					var n uint64
					td.ScanArgs(t, "seq", &n)
					r.At = &At{Seq: &n}
				}
				if td.HasArg("turn") {
					if r.At == nil {
						r.At = &At{}
					}
					td.ScanArgs(t, "turn", &r.At.TurnID)
				}
				rep, err := svc.Fork(ctx, r)
				if err != nil {
					return renderRefusal(err)
				}
				return fmt.Sprintf("child %s of %s: seedLength %d, depth %d\n", rep.ChildID, rep.ParentID, rep.SeedLength, rep.Depth)
			case "erase":
				if td.HasArg("accepted") {
					if _, _, err := b.Log.MarkErased(ctx, logstore.Erasure{SessionID: id, By: "script", Reason: "test", Phase: logstore.ErasePhaseDeleting}); err != nil {
						t.Fatal(err)
					}
					return "ok\n"
				}
				b.Erase(t, id)
				return "ok\n"
			case "crashed":
				// A copy a forker left when it crashed: its record and the
				// first copied events of the child.
				var child string
				var seed uint64
				var copied int
				td.ScanArgs(t, "child", &child)
				td.ScanArgs(t, "seed", &seed)
				td.MaybeScanArgs(t, "copied", &copied)
				heartbeat := time.Now().Add(-time.Hour)
				if td.HasArg("fresh") {
					heartbeat = time.Now()
				}
				if _, err := leaveCopy(ctx, svc, b.Log.(Log), id, child, seed, copied, heartbeat); err != nil {
					t.Fatal(err)
				}
				return "ok\n"
			case "sweep":
				if err := svc.Sweep(ctx); err != nil {
					return scripttest.Error(err)
				}
				return "ok\n"
			case "records":
				children, err := svc.bucket().Children(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(children) == 0 {
					return "none\n"
				}
				return strings.Join(children, "\n") + "\n"
			}
			t.Fatalf("unknown command %s", td.Cmd)
			return ""
		}
	})
}

// renderRefusal is the error and the fields of its contract error that a
// client reads: the nearest safe seqs, the current seq.
func renderRefusal(err error) string {
	out := scripttest.Error(err)
	var se *schema.Error
	if !errors.As(err, &se) {
		return out
	}
	if se.NearestSafeBefore != nil || se.NearestSafeAfter != nil {
		out += fmt.Sprintf("nearestSafeBefore=%s nearestSafeAfter=%s\n", seqOrNone(se.NearestSafeBefore), seqOrNone(se.NearestSafeAfter))
	}
	if se.CurrentSeq != nil {
		out += fmt.Sprintf("currentSeq=%d\n", *se.CurrentSeq)
	}
	return out
}
