package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunRepairSmall runs the repair benchmark's code path on a few
// sessions, with the per-stage timings -v prints; it asserts no speed.
func TestRunRepairSmall(t *testing.T) {
	var progress bytes.Buffer
	res, err := RunRepair(context.Background(), RepairConfig{Sessions: 20, LeaseTTL: time.Second, Grace: 100 * time.Millisecond,
		Replicas: 1, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 20 {
		t.Fatalf("%+v", res)
	}
	var stages string
	for _, l := range strings.Split(progress.String(), "\n") {
		if strings.HasPrefix(l, "stages after due") {
			stages = l
		}
	}
	for _, want := range []string{"started=", "decided=", "ended=", "sent=", "committed="} {
		i := strings.Index(stages, want)
		if i < 0 || !strings.HasPrefix(stages[i:][strings.Index(stages[i:], "(n="):], "(n=20)") {
			t.Fatalf("stage %s not seen for every session: %q", want, stages)
		}
	}
}
