package bench

import (
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/internal/testbin"
)

// TestRunLoadSmall runs the load benchmark's code path on a small
// session (two pages of the read API), so the bench command cannot rot;
// it asserts no speed.
func TestRunLoadSmall(t *testing.T) {
	res, err := RunLoad(context.Background(), LoadConfig{Events: 1500, Rounds: 2, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Client) != 2 || len(res.HTTP) != 2 || len(res.Raw) != 2 {
		t.Fatalf("%+v", res)
	}
}

// TestRunRestartSmall runs the first-append-after-restart benchmark on a
// session of 12,000 events: the first writer stores a snapshot (RunRestart
// fails without one) and both appends commit; the repairer's and the
// forker's first work after it answer as they must (a repair with nothing
// to close, whole forks, a refused cut); it asserts no speed.
func TestRunRestartSmall(t *testing.T) {
	res, err := RunRestart(context.Background(), RestartConfig{Events: 12_000, Restarts: 3, Dir: t.TempDir(), Services: true, ForkCopy: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cold.Took <= 0 || len(res.Snap) != 3 || res.Snap[2].Took <= 0 {
		t.Fatalf("%+v", res)
	}
	for _, w := range []FirstWork{res.Repair, res.Resolve, res.Fork} {
		if len(w.Snap) == 0 || len(w.Cold) == 0 {
			t.Fatalf("%+v", res)
		}
	}
}

// TestRunCatchupSmall runs the catch-up benchmark's code path, floors
// and the catch-up by a projector process included, on a small stream.
func TestRunCatchupSmall(t *testing.T) {
	res, err := RunCatchup(context.Background(), CatchupConfig{Events: 3000, Sessions: 20, MaxBatchEvents: 500, Dir: t.TempDir(),
		ProjectorBinary: testbin.Path(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.EventsPerSec <= 0 || res.ConsumeWritePerSec <= 0 || res.ConsumeOnlyPerSec <= 0 || res.RawKeysPerSec <= 0 ||
		res.Process.PeakRSSBytes <= 0 || res.Process.Catchup <= 0 || res.Process.CPU <= 0 {
		t.Fatalf("%+v", res)
	}
}

func TestMain(m *testing.M) { testbin.Main(m) }
