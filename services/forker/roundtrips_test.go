package forker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// A fresh child is counted in its tenant's usage while the fork reads the
// child's erasure record and drops its own record after the copy, not
// after that read: with the fork held once the copy ended (StepCopied),
// before the read, the child's count is stored already.
func TestForkCountsChildWithoutWaitingForErasureRead(t *testing.T) {
	tenant := logstore.UsageTenant("c")
	var e *env
	held := false
	e = newEnv(t, func(c *Config) {
		c.Step = func(step string) {
			if step != StepCopied {
				return
			}
			held = true
			natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				u, err := e.st.UsageOf(e.ctx, tenant)
				if err != nil {
					return err
				}
				if u.Sessions != 1 || u.Bytes <= 0 {
					return fmt.Errorf("usage %+v while the fork is held before the erasure read, want the child counted", u)
				}
				return nil
			})
		}
	})
	e.appendLines("p", basic...)
	if _, err := e.svc.ForkAs(e.ctx, api.Caller{}, Request{ParentID: "p", ChildID: "c"}); err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("the fork never reached StepCopied")
	}
	e.checkChild("c", "p", 9, 1)
	e.noRecord("c")
}

// tailWithSnapshot is the real store, whose snapshot load of parent waits
// (up to a bound) for a read of parent's tail to begin: a forker that
// reads the tail only after the load finds the load late.
type tailWithSnapshot struct {
	*logstore.Store
	parent string
	once   sync.Once
	tailed chan struct{}
	late   atomic.Bool
}

func (l *tailWithSnapshot) Tail(ctx context.Context, id string) (logstore.Tail, error) {
	if id == l.parent {
		l.once.Do(func() { close(l.tailed) })
	}
	return l.Store.Tail(ctx, id)
}

func (l *tailWithSnapshot) LoadSnapshot(ctx context.Context, id string) (*logstore.SnapshotBase, error) {
	if id == l.parent {
		select {
		case <-l.tailed:
		case <-time.After(10 * time.Second):
			l.late.Store(true)
		}
	}
	return l.Store.LoadSnapshot(ctx, id)
}

// The parent's tail is read from its leader while its snapshot is loaded,
// not after the load: one round trip before the scan's read, not two.
func TestForkReadsParentTailWithSnapshot(t *testing.T) {
	var l *tailWithSnapshot
	e := newEnv(t, func(c *Config) {
		l = &tailWithSnapshot{Store: c.Store.(*logstore.Store), parent: "p", tailed: make(chan struct{})}
		c.Store = l
	})
	e.appendLines("p", basic...)
	e.mustFork(Request{ParentID: "p", ChildID: "c"})
	if l.late.Load() {
		t.Error("the parent's snapshot load ended before its tail was asked")
	}
	e.checkChild("c", "p", 9, 1)
}
