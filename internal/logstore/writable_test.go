package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// TestWritableDegraded: with one node of three down the streams keep a
// leader and a quorum (writable), but the replica on that node is not
// reached: Writable says degraded, naming it, and is fine again once the
// node is back.
func TestWritableDegraded(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, c.Servers[0])
	st := open(t, nc, logstore.Config{Replicas: 3})
	ctx := context.Background()
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		_, err := st.Writable(ctx)
		return err
	})
	// Stop a node that is not the one the store is connected to.
	down := 2
	c.Servers[down].Shutdown()
	c.Servers[down].WaitForShutdown()
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		leaders, err := st.Writable(ctx)
		var deg *logstore.DegradedError
		if !errors.As(err, &deg) {
			return fmt.Errorf("Writable = %v, want degraded", err)
		}
		if len(deg.Peers) == 0 || deg.Peers[0] != "S-3" {
			return fmt.Errorf("degraded names %v, want S-3", deg.Peers)
		}
		if len(leaders) != len(logstore.Streams())+2 {
			return fmt.Errorf("leaders %v", leaders)
		}
		return nil
	})
	c.Restart(down)
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		_, err := st.Writable(ctx)
		return err
	})
}
