package projector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// A projector started while the cluster has no quorum (two of three nodes
// down: every JetStream request answers "temporarily unavailable" or
// nothing) waits for it to come back within New's deadline, and then
// starts and catches up, rather than exiting on the first answer (what the
// fault suite saw after a partition healed).
func TestStartWaitsOutNoQuorum(t *testing.T) {
	c, e := projectortest.ClusterEnv(t)
	c.WaitStreamLeader(logstore.StreamName)
	projectortest.PublishN(t, e, gen.NewSession("before", projectortest.T0), 3)
	c.WaitStreamsCurrent(logstore.StreamName)

	for _, i := range []int{1, 2} {
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
	}
	// The leader left alone steps down once it misses its followers.
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if _, err := e.LS.LastHeldSeq(e.Ctx, logstore.StreamName); err == nil || !logstore.Unreachable(err) {
			return fmt.Errorf("the last message held, without a quorum: %v, want an unreachable log", err)
		}
		return nil
	})
	type started struct {
		s   *projector.Service
		err error
	}
	done := make(chan started, 1)
	go func() {
		s, err := projector.New(projector.Config{Store: e.LS, DataDir: t.TempDir(), Heartbeat: 200 * time.Millisecond})
		done <- started{s, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("New returned while the cluster had no quorum: %v", r.err)
	case <-time.After(2 * time.Second):
	}
	for _, i := range []int{1, 2} {
		c.Restart(i)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("New after the quorum came back: %v", r.err)
	}
	runCtx, stop := context.WithCancel(e.Ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.s.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, r.s.Ready)
}
