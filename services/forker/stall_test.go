package forker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A fork whose store calls lose their replies mid-copy (the link to the
// server paused, as a paused or crashed node loses them) fails with a
// retryable code and gives its slot back, instead of waiting out its
// half-hour timeout (the e2e fault suite found every slot held that way);
// sent again once the link is back, the same request finishes the child.
func TestForkRepliesLost(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := gen.Seed(e.ctx, e.st, "long", 5000, 1000); err != nil {
		t.Fatal(err)
	}
	nc, p := natstest.ConnectThrough(t, e.srv)
	st, err := logstore.Open(e.ctx, nc, logstore.Config{RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The copy reads the parent again (no scanned bodies kept), in small
	// batches, so the link goes while it reads and appends.
	svc := e.startForker(func(c *Config) { c.Store, c.Conn, c.ScanBodyBudget, c.BatchSize = st, nc, -1, 50 })
	req := Request{ParentID: "long", ChildID: "c"}
	fork := func() (chan error, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(e.ctx, DefaultConfig().ForkTimeout)
		done := make(chan error, 1)
		go func() {
			_, err := svc.Fork(ctx, req)
			done <- err
		}()
		return done, cancel
	}
	done, cancel := fork()
	defer cancel()
	natstest.CheckFor(t, time.Minute, time.Millisecond, func() error {
		if tail, err := e.st.Tail(e.ctx, "c"); err != nil || tail.Seq < 100 {
			return fmt.Errorf("child at %d events (%v)", tail.Seq, err)
		}
		return nil
	})
	p.Pause()
	select {
	case err := <-done:
		if c := schema.CodeOf(err); c != schema.CodeOutcomeUnknown && c != schema.CodeNotCommitted {
			t.Fatalf("fork with its replies lost: %v (code %s), want outcome_unknown or not_committed", err, c)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the fork is still waiting for replies lost with the link")
	}
	p.Resume()
	var ferr error
	for try := 0; try < 20; try++ {
		done, cancel := fork()
		ferr = <-done
		cancel()
		if ferr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ferr != nil {
		t.Fatalf("fork sent again after the link came back: %v", ferr)
	}
	e.checkChild("c", "long", 5000, 1)
}
