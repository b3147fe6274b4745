package forker

import (
	"fmt"
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
