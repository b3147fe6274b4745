package eraser

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/forker"
)

// A cascade erase reaches a child still being copied (ADR 009, "Forks in
// flight"): the erase is accepted while a fork of the parent is under way
// and its child has no event yet, so at most its fork record names it.
// Before the record is written, the cascade cannot know the child, and the
// fork, reading the parent's erasure record after writing its own, writes
// nothing; once the record is written, the eraser finds it and erases the
// child too, and the fork is answered erased (before the copy starts or
// after it ends, the job waiting for it). Either way nothing of the parent
// or the child is left.
func TestCascadeEraseReachesForkInFlight(t *testing.T) {
	for _, tc := range []struct{ at, cascade string }{
		{forker.StepScanned, "p"},
		{forker.StepClaimed, "p,c"},
		{forker.StepChecked, "p,c"},
	} {
		at := tc.at
		t.Run(at, func(t *testing.T) {
			e := newEnv(t)
			r := e.start(Config{SweepInterval: time.Hour})
			marker := strings.Repeat("F", 64)
			e.eraseSession("p", marker, "")
			req := EraseRequest{SessionID: "p", Reason: "r", By: "b", Cascade: true}
			ctx := context.Background()

			var once sync.Once
			var accepted []string
			var acceptErr error
			fk, err := forker.New(forker.Config{Store: e.store, Conn: e.nc, Step: func(step string) {
				if step == at {
					once.Do(func() { accepted, acceptErr = r.svc.acceptErase(ctx, req) })
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			fctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- fk.Run(fctx) }()
			t.Cleanup(func() { cancel(); <-done })
			natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, fk.Ready)

			_, err = fk.Fork(ctx, forker.Request{ParentID: "p", ChildID: "c"})
			if acceptErr != nil {
				t.Fatalf("erase accepted with %v", acceptErr)
			}
			if strings.Join(accepted, ",") != tc.cascade {
				t.Errorf("the cascade names %v, want %s", accepted, tc.cascade)
			}
			if schema.CodeOf(err) != schema.CodeErased {
				t.Errorf("fork answered %v, want erased", err)
			}
			got, err := r.svc.Erase(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Erased, ",") != tc.cascade {
				t.Errorf("erased %v, want %s", got.Erased, tc.cascade)
			}
			e.gone("p")
			if m, err := e.store.NextAfter(ctx, "c", 0); err != nil || m != nil {
				t.Errorf("c holds a message (%v, %v)", m, err)
			}
			if f, ok, err := e.store.ForkInFlightOf(ctx, "c"); err != nil || ok {
				t.Errorf("fork record of c left: %+v %v", f, err)
			}
			if n, want := len(e.audits()), len(got.Erased); n != want {
				t.Errorf("%d audit records, want %d", n, want)
			}
		})
	}
}
