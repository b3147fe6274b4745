package eraser

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/pkg/api"
)

var _ Log = (*memlog.Log)(nil)

// audits is how a script reads the audit records (memlog and logstore).
type audits interface {
	AuditRecords(ctx context.Context, after uint64, limit int) ([]api.AuditRecord, uint64, error)
}

// errStopped is the kill an erase is stopped by (erase stop=).
var errStopped = errors.New("stopped")

// TestScripts runs the scripts in testdata/erase on the in-memory log and
// on logstore over an embedded NATS server (scripttest.Run): the same
// output on both. Commands (id= names the session, default s), beside
// scripttest's:
//
//	erase [id=] [cascade] [stop=STEP] [nth=N]
//	                     Service.Erase by ops for "test"; stop: the erase
//	                     is killed at the nth time (default 1) it reaches
//	                     the step (marked, hashed, deleted, records,
//	                     audited)
//	resume [id=]         the session's erase job run to its end, as the
//	                     eraser that takes it on does
//	record [id=]         the session's erasure record
//	audit                the audit records (unhashed when not 0)
func TestScripts(t *testing.T) {
	scripttest.Run(t, filepath.Join("testdata", "erase"), logstore.Config{}, "s", func(t *testing.T, b *scripttest.Backend) scripttest.Commands {
		svc, err := New(Config{Store: b.Log.(Log), Conn: b.Conn})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		return func(t *testing.T, td *datadriven.TestData, id string) string {
			switch td.Cmd {
			case "erase":
				if td.HasArg("stop") {
					var step string
					nth := 1
					td.ScanArgs(t, "stop", &step)
					td.MaybeScanArgs(t, "nth", &nth)
					hook := func(s string) error {
						if s == step {
							if nth--; nth == 0 {
								return errStopped
							}
						}
						return nil
					}
					svc.eraseStep.Store(&hook)
					defer svc.eraseStep.Store(nil)
				}
				rep, err := svc.Erase(ctx, EraseRequest{SessionID: id, Reason: "test", By: "ops", Cascade: td.HasArg("cascade")})
				if err != nil {
					return scripttest.Error(err)
				}
				var out strings.Builder
				fmt.Fprintf(&out, "%s: erased %s (%d events)\n", rep.State, strings.Join(rep.Erased, ","), rep.Events)
				for _, j := range rep.Jobs {
					fmt.Fprintf(&out, "job %s: %s %d/%d\n", j.SessionID, j.Phase, j.Deleted, j.Total)
				}
				return out.String()
			case "resume":
				if err := svc.runErase(ctx, id); err != nil {
					return scripttest.Error(err)
				}
				return "ok\n"
			case "record":
				rec, _, err := svc.st.ErasureOf(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if rec == nil {
					return "none\n"
				}
				return fmt.Sprintf("phase %s done %v: total %d deleted %d events %d lastSeq %d sealed %v sha256 %s\n",
					rec.Phase, rec.Done, rec.Total, rec.Deleted, rec.Events, rec.LastSeq, rec.Sealed, short(rec.SHA256))
			case "audit":
				recs, _, err := b.Log.(audits).AuditRecords(ctx, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				var out strings.Builder
				for _, r := range recs {
					fmt.Fprintf(&out, "%s: %d events, last seq %d, by %s (%s), sha256 %s", r.SessionID, r.Events, r.LastSeq, r.By, r.Reason, short(r.SHA256))
					if r.Unhashed > 0 {
						fmt.Fprintf(&out, ", %d unhashed", r.Unhashed)
					}
					out.WriteString("\n")
				}
				if out.Len() == 0 {
					return "none\n"
				}
				return out.String()
			}
			t.Fatalf("unknown command %s", td.Cmd)
			return ""
		}
	})
}

// short is the start of a digest: enough to tell two apart.
func short(sum string) string { return sum[:min(len(sum), 16)] }
