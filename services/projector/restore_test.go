package projector_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestRestoreOfManyEventsThroughConsumer: with snapshots far apart, a
// restarted projector restores each session's fold state from more events
// than it reads one by one (through a consumer on the session), and the
// views it goes on to build equal a clean rebuild.
func TestRestoreOfManyEventsThroughConsumer(t *testing.T) {
	e := projectortest.NewEnv(t)
	fleet := gen.NewFleet("rc", 3, 5, projectortest.T0)
	if _, err := fleet.Fill(e.Ctx, e.LS, 600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// No snapshot before 1,000 events: each session's ~200 events are
	// all re-read on restore.
	r := e.Start(dir, func(c *projector.Config) { c.SnapshotEvery = 1000 })
	r.WaitReady(t)
	r.Stop(t)
	if _, err := fleet.Fill(e.Ctx, e.LS, 30); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r = e.Start(dir, func(c *projector.Config) { c.SnapshotEvery = 1000; c.Registerer = reg })
	r.WaitReady(t)
	r.Stop(t)
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
	res, err := projector.Verify(e.Ctx, e.LS, dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("after restores: %+v", res)
	}
}
