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
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// An erased session (DESIGN.md section 14) is refused by every read at
// once, leaves every list, and its views are gone: the store verifies
// against a clean rebuild of the stream that no longer holds it, also
// after a restart. /v1/audit serves the audit record.
func TestErasedSessionLeavesEveryView(t *testing.T) {
	e := projectortest.NewEnv(t)
	gen.NewFleet("x", 4, 3, projectortest.T0).Fill(e.Ctx, e.LS, 300)
	dir := t.TempDir()
	r := e.Start(dir)
	r.WaitReady(t)
	r.WaitSession(t, "x-1", func(d httpapi.Detail) bool { return d.LastSeq > 0 })

	rec := e.Erase("x-1")
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		for _, p := range []string{"", "/events", "/context"} {
			code, body := r.Get(t, "/v1/sessions/x-1"+p)
			if code != 404 || !strings.Contains(string(body), `"code":"erased"`) {
				return fmt.Errorf("GET x-1%s: %d %s", p, code, body)
			}
		}
		code, body := r.Get(t, "/v1/sessions?limit=1000")
		if code != 200 || strings.Contains(string(body), `"x-1"`) || !strings.Contains(string(body), `"x-2"`) {
			return fmt.Errorf("list: %d %s", code, body)
		}
		return nil
	})
	var page httpapi.AuditPage
	r.GetJSON(t, "/v1/audit", &page)
	if len(page.Records) != 1 || !reflect.DeepEqual(page.Records[0], api.AuditRecord{SessionID: "x-1", By: "test", Reason: "r", ErasedAt: rec.ErasedAt}) {
		b, _ := json.Marshal(page)
		t.Fatalf("audit %s", b)
	}
	// The list lost x-1 once its views were deleted: the store verifies,
	// and again after a restart.
	r.Stop(t)
	res, err := projector.Verify(e.Ctx, e.LS, dir, filepath.Join(t.TempDir(), "v1"), nil)
	if err != nil || !res.OK() {
		t.Fatalf("after the erase: %+v %v", res, err)
	}
	r = e.Start(dir)
	r.WaitReady(t)
	if code, _ := r.Get(t, "/v1/sessions/x-1"); code != 404 {
		t.Fatalf("x-1 after a restart: %d", code)
	}
	r.Stop(t)
	res, err = projector.Verify(e.Ctx, e.LS, dir, filepath.Join(t.TempDir(), "v2"), nil)
	if err != nil || !res.OK() {
		t.Fatalf("after a restart: %+v %v", res, err)
	}
}

// TestErasedInNoListBeforeItsViewsGo: from the moment reads refuse an
// erased session, before the fold has removed its views, it is in no list
// and no search, for the operator's token as for a tenant's.
func TestErasedInNoListBeforeItsViewsGo(t *testing.T) {
	e := projectortest.NewEnv(t)
	gen.NewFleet("x", 4, 3, projectortest.T0).Fill(e.Ctx, e.LS, 300)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	for _, id := range []string{"x-1", "x-2"} {
		r.WaitSession(t, id, func(d httpapi.Detail) bool { return d.LastSeq > 0 })
	}
	list := func() string {
		code, body := r.Get(t, "/v1/sessions?limit=1000")
		if code != 200 {
			t.Fatalf("list: %d %s", code, body)
		}
		return string(body)
	}
	search := func() string {
		code, body := r.Get(t, "/v1/search?q=load&limit=100")
		if code != 200 {
			t.Fatalf("search: %d %s", code, body)
		}
		return string(body)
	}
	if !strings.Contains(list(), `"x-1"`) || !strings.Contains(search(), `"x-1"`) {
		t.Fatalf("x-1 not listed or found before the erase: %s %s", list(), search())
	}
	projector.MarkErased(r.Service, "x-1")
	if code, body := r.Get(t, "/v1/sessions/x-1"); code != 404 || !strings.Contains(string(body), `"code":"erased"`) {
		t.Fatalf("GET x-1: %d %s", code, body)
	}
	if l := list(); strings.Contains(l, `"x-1"`) || !strings.Contains(l, `"x-2"`) {
		t.Errorf("list after the erase: %s", l)
	}
	if s := search(); strings.Contains(s, `"x-1"`) || !strings.Contains(s, `"x-2"`) {
		t.Errorf("search after the erase: %s", s)
	}
}

// TestReadyWhenTheStreamsTailIsErased: a projector started from nothing
// on a stream whose last messages were all erased is ready once it has
// folded what the stream still holds; the stream's last sequence (kept
// after its message is deleted) is no message it can reach. Also a
// stream of which every message was erased, and a tail erased while the
// projector catches up.
func TestReadyWhenTheStreamsTailIsErased(t *testing.T) {
	e := projectortest.NewEnv(t)
	gen.NewFleet("x", 2, 3, projectortest.T0).Fill(e.Ctx, e.LS, 20)
	gen.NewFleet("y", 1, 3, projectortest.T0).Fill(e.Ctx, e.LS, 10)
	e.Erase("y-0")
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	r.WaitSession(t, "x-1", func(d httpapi.Detail) bool { return d.LastSeq > 0 })
	r.Stop(t)

	// Erased after the projector read where the stream ends and before
	// it folded it (New reads it, Run folds).
	gen.NewFleet("z", 1, 3, projectortest.T0).Fill(e.Ctx, e.LS, 10)
	r = e.StartPrepared(t.TempDir(), func(*projector.Service) { e.Erase("z-0") })
	r.WaitReady(t)
	r.Stop(t)

	e.Erase("x-0")
	e.Erase("x-1")
	r = e.Start(t.TempDir())
	r.WaitReady(t)
}

// verify-projection of a store whose checkpoint names a message erased
// since: the rebuild is done at the last message the stream holds instead
// of waiting for the erased one, and folds no message appended after the
// position (which would make its views differ from the store's).
func TestVerifyAfterTheTailIsErased(t *testing.T) {
	e := projectortest.NewEnv(t)
	projectortest.PublishN(t, e, gen.NewSession("a", projectortest.T0), 3)
	projectortest.PublishN(t, e, gen.NewSession("b", projectortest.T0), 3)
	dir := t.TempDir()
	r := e.Start(dir)
	r.WaitReady(t)
	r.WaitSession(t, "b", func(d httpapi.Detail) bool { return d.LastSeq == 3 })
	e.Erase("b")
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if code, body := r.Get(t, "/v1/sessions?limit=10"); code != 200 || strings.Contains(string(body), `"b"`) {
			return fmt.Errorf("list: %d %s", code, body)
		}
		return nil
	})
	r.Stop(t)
	verify := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
		defer cancel()
		res, err := projector.Verify(ctx, e.LS, dir, filepath.Join(t.TempDir(), name), nil)
		if err != nil || !res.OK() {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
		if got := res.Checkpoint.Stream(logstore.StreamName).Seq; got != 6 {
			t.Fatalf("%s: checkpoint at %d, want 6 (the erased message)", name, got)
		}
	}
	verify("nothing-after")
	projectortest.PublishN(t, e, gen.NewSession("c", projectortest.T0), 3)
	verify("appended-after")
}
