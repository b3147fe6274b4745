package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
)

// An erased session (DESIGN.md section 14) is refused by every read at
// once, leaves every list, and its views are gone: the store verifies
// against a clean rebuild of the stream that no longer holds it, also
// after a restart. /v1/audit serves the audit record.
// erase erases session id as the eraser does (by "test", reason "r"):
// marked, its events deleted, its audit record written. The record names
// no owner, as those written before records named them (the projector
// then takes the owner it kept, ErasedOwnerKey); the eraser's own are
// read in TestTenantAuditOwnerFromRecord.
func (e *env) erase(id string) logstore.Erasure {
	e.t.Helper()
	rec, _, err := e.ls.MarkErased(e.ctx, logstore.Erasure{SessionID: id, By: "test", Reason: "r", ErasedAt: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.ls.EraseEvents(e.ctx, id, nil); err != nil {
		e.t.Fatal(err)
	}
	if err := e.ls.WriteAudit(e.ctx, rec.Audit()); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func TestErasedSessionLeavesEveryView(t *testing.T) {
	e := newEnv(t)
	gen.NewFleet("x", 4, 3, t0).Fill(e.ctx, e.ls, 300)
	dir := t.TempDir()
	r := e.start(dir)
	r.waitReady(t)
	r.waitSession(t, "x-1", func(d httpapi.Detail) bool { return d.LastSeq > 0 })

	rec := e.erase("x-1")
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		for _, p := range []string{"", "/events", "/context"} {
			code, body := r.get(t, "/v1/sessions/x-1"+p)
			if code != 404 || !strings.Contains(string(body), `"code":"erased"`) {
				return fmt.Errorf("GET x-1%s: %d %s", p, code, body)
			}
		}
		code, body := r.get(t, "/v1/sessions?limit=1000")
		if code != 200 || strings.Contains(string(body), `"x-1"`) || !strings.Contains(string(body), `"x-2"`) {
			return fmt.Errorf("list: %d %s", code, body)
		}
		return nil
	})
	var page httpapi.AuditPage
	r.getJSON(t, "/v1/audit", &page)
	if len(page.Records) != 1 || !reflect.DeepEqual(page.Records[0], api.AuditRecord{SessionID: "x-1", By: "test", Reason: "r", ErasedAt: rec.ErasedAt}) {
		b, _ := json.Marshal(page)
		t.Fatalf("audit %s", b)
	}
	// The list lost x-1 once its views were deleted: the store verifies,
	// and again after a restart.
	r.stop(t)
	res, err := projector.Verify(e.ctx, e.ls, dir, filepath.Join(t.TempDir(), "v1"), nil)
	if err != nil || !res.OK() {
		t.Fatalf("after the erase: %+v %v", res, err)
	}
	r = e.start(dir)
	r.waitReady(t)
	if code, _ := r.get(t, "/v1/sessions/x-1"); code != 404 {
		t.Fatalf("x-1 after a restart: %d", code)
	}
	r.stop(t)
	res, err = projector.Verify(e.ctx, e.ls, dir, filepath.Join(t.TempDir(), "v2"), nil)
	if err != nil || !res.OK() {
		t.Fatalf("after a restart: %+v %v", res, err)
	}
}

// TestReadyWhenTheStreamsTailIsErased: a projector started from nothing
// on a stream whose last messages were all erased is ready once it has
// folded what the stream still holds; the stream's last sequence (kept
// after its message is deleted) is no message it can reach. Also a
// stream of which every message was erased, and a tail erased while the
// projector catches up.
func TestReadyWhenTheStreamsTailIsErased(t *testing.T) {
	e := newEnv(t)
	gen.NewFleet("x", 2, 3, t0).Fill(e.ctx, e.ls, 20)
	gen.NewFleet("y", 1, 3, t0).Fill(e.ctx, e.ls, 10)
	e.erase("y-0")
	r := e.start(t.TempDir())
	r.waitReady(t)
	r.waitSession(t, "x-1", func(d httpapi.Detail) bool { return d.LastSeq > 0 })
	r.stop(t)

	// Erased after the projector read where the stream ends and before
	// it folded it (New reads it, Run folds).
	gen.NewFleet("z", 1, 3, t0).Fill(e.ctx, e.ls, 10)
	r = e.startPrepared(t.TempDir(), func(*projector.Service) { e.erase("z-0") })
	r.waitReady(t)
	r.stop(t)

	e.erase("x-0")
	e.erase("x-1")
	r = e.start(t.TempDir())
	r.waitReady(t)
}

// verify-projection of a store whose checkpoint names a message erased
// since: the rebuild is done at the last message the stream holds instead
// of waiting for the erased one, and folds no message appended after the
// position (which would make its views differ from the store's).
func TestVerifyAfterTheTailIsErased(t *testing.T) {
	e := newEnv(t)
	publishN(t, e, gen.NewSession("a", t0), 3)
	publishN(t, e, gen.NewSession("b", t0), 3)
	dir := t.TempDir()
	r := e.start(dir)
	r.waitReady(t)
	r.waitSession(t, "b", func(d httpapi.Detail) bool { return d.LastSeq == 3 })
	e.erase("b")
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if code, body := r.get(t, "/v1/sessions?limit=10"); code != 200 || strings.Contains(string(body), `"b"`) {
			return fmt.Errorf("list: %d %s", code, body)
		}
		return nil
	})
	r.stop(t)
	verify := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		res, err := projector.Verify(ctx, e.ls, dir, filepath.Join(t.TempDir(), name), nil)
		if err != nil || !res.OK() {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
		if got := res.Checkpoint.Stream(logstore.StreamName).Seq; got != 6 {
			t.Fatalf("%s: checkpoint at %d, want 6 (the erased message)", name, got)
		}
	}
	verify("nothing-after")
	publishN(t, e, gen.NewSession("c", t0), 3)
	verify("appended-after")
}
