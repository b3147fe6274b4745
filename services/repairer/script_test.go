package repairer

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
)

var _ Log = (*memlog.Log)(nil)

// TestScripts runs the scripts in testdata/repair on the in-memory log and
// on logstore over an embedded NATS server (scripttest.Run): the same
// output on both. Commands (id= names the session, default s):
//
//	append [id=]             the input's events (sessiontest's short form)
//	                         after the session's tail, in one batch
//	claim [id=] holder=H     H takes or renews the session's lease
//	end-lease [id=]          the lease is deleted: its holder is gone
//	repair [id=] [force] [race] [replica]
//	                         sessions.api.repair (Service.Repair); race:
//	                         the input's events are appended once between
//	                         the plan and its append, as a holder that came
//	                         back would; replica: another replica repairs
//	                         the session there
//	repair-group ids=(A,B,...)
//	                         the sessions repaired at once, their repairs
//	                         committed in grouped batches (group.go)
//	sweep [id=]              one evaluation of the session as a sweep makes
//	                         it (check), and the claim drops it queued
//	snapshot [id=] seq=N [bad]
//	                         the session's snapshot at seq N, as a writer
//	                         stores it (bad: its hash is not the body's)
//	folds                    what the repairs so far read: events folded,
//	                         snapshots used and ignored
//	show [id=]               the session as the log judges it, its lease and
//	                         its claim
func TestScripts(t *testing.T) {
	scripttest.Run(t, filepath.Join("testdata", "repair"), logstore.Config{LeaseTTL: time.Minute}, "s", func(t *testing.T, b *scripttest.Backend) scripttest.Commands {
		svc, err := New(Config{Store: b.Log.(Log), Conn: b.Conn, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		return func(t *testing.T, td *datadriven.TestData, id string) string {
			switch td.Cmd {
			case "repair":
				if td.HasArg("race") {
					once := false
					hook := func(string) {
						if !once {
							once = true
							b.Append(t, id, td.Input)
						}
					}
					svc.beforeAppend.Store(&hook)
					defer svc.beforeAppend.Store(nil)
				}
				var other string
				if td.HasArg("replica") {
					// Another replica repairs the session between this
					// one's plan and its append.
					replica, err := New(Config{Store: b.Log.(Log), Conn: b.Conn, SweepInterval: -1})
					if err != nil {
						t.Fatal(err)
					}
					once := false
					hook := func(string) {
						if !once {
							once = true
							out, err := replica.Repair(ctx, id, td.HasArg("force"))
							if other = "the other replica: " + renderOutcome(out); err != nil {
								other = "the other replica: " + scripttest.Error(err)
							}
						}
					}
					svc.beforeAppend.Store(&hook)
					defer svc.beforeAppend.Store(nil)
				}
				out, err := svc.Repair(ctx, id, td.HasArg("force"))
				if err != nil {
					return other + scripttest.Error(err)
				}
				return other + renderOutcome(out)
			case "repair-group":
				// Repairs ready at once, committed in grouped batches
				// (group.go) as while the service runs.
				var ids []string
				td.ScanArgs(t, "ids", &ids)
				gctx, stop := context.WithCancel(ctx)
				svc.grouper.Store(newGrouper(svc, gctx))
				// The planned repairs wait for each other before they are
				// submitted, so that they are ready at once.
				var planned sync.WaitGroup
				var planners sync.Map
				planned.Add(len(ids))
				hook := func(id string) {
					planners.Store(id, true)
					planned.Done()
					planned.Wait()
				}
				svc.beforeAppend.Store(&hook)
				defer svc.beforeAppend.Store(nil)
				outs := make([]string, len(ids))
				var wg sync.WaitGroup
				for i, id := range ids {
					wg.Go(func() {
						out, err := svc.Repair(ctx, id, false)
						if _, ok := planners.Load(id); !ok {
							planned.Done() // it planned nothing
						}
						if err != nil {
							outs[i] = id + ": " + scripttest.Error(err)
							return
						}
						outs[i] = id + ": " + renderOutcome(out)
					})
				}
				wg.Wait()
				svc.grouper.Store(nil)
				stop()
				return strings.Join(outs, "")
			case "snapshot":
				var seq uint64
				td.ScanArgs(t, "seq", &seq)
				b.Snapshot(t, id, seq, td.HasArg("bad"))
				return "ok\n"
			case "folds":
				// What the repairs so far read: events folded, snapshots
				// used and ignored.
				return fmt.Sprintf("folded %v events; snapshots used %v, ignored %v\n", counter(t, svc.m.folded),
					counter(t, svc.m.snapLoads.WithLabelValues("used")), counter(t, svc.m.snapLoads.WithLabelValues("ignored")))
			case "sweep":
				svc.check(ctx, id, triggerSweep)
				for len(svc.drops) > 0 {
					svc.dropNow(ctx, <-svc.drops)
				}
				return "ok\n"
			}
			t.Fatalf("unknown command %s", td.Cmd)
			return ""
		}
	})
}

func renderOutcome(o Outcome) string {
	if !o.Repaired {
		return "nothing to repair\n"
	}
	closed := make([]string, len(o.Closed))
	for i, c := range o.Closed {
		closed[i] = c.Kind + " " + c.ID
	}
	dup := ""
	if o.Duplicate {
		dup = " (duplicate)"
	}
	return fmt.Sprintf("repaired seqs %d-%d%s, closed: %s\n", o.FirstSeq, o.LastSeq, dup, strings.Join(closed, ", "))
}
