package projector_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/services/projector"
)

// TestRestoreOfManyEventsThroughConsumer: with snapshots far apart, a
// restarted projector restores each session's fold state from more events
// than it reads one by one (through a consumer on the session), and the
// views it goes on to build equal a clean rebuild.
func TestRestoreOfManyEventsThroughConsumer(t *testing.T) {
	e := newEnv(t)
	fleet := gen.NewFleet("rc", 3, 5, t0)
	if _, err := fleet.Fill(e.ctx, e.ls, 600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// No snapshot before 1,000 events: each session's ~200 events are
	// all re-read on restore.
	r := e.start(dir, func(c *projector.Config) { c.SnapshotEvery = 1000 })
	r.waitReady(t)
	r.stop(t)
	if _, err := fleet.Fill(e.ctx, e.ls, 30); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r = e.start(dir, func(c *projector.Config) { c.SnapshotEvery = 1000; c.Registerer = reg })
	r.waitReady(t)
	r.stop(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	restores := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "sessionlog_projector_state_restores_total" {
			restores = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if restores != 3 {
		t.Fatalf("%v restores, want 3", restores)
	}
	res, err := projector.Verify(e.ctx, e.ls, dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("after restores: %+v", res)
	}
}
