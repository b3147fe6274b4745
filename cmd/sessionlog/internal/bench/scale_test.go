package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScaleSmall runs every part of the scale benchmark on a few sessions
// and events, the writer and the repairer as processes of the sessionlog
// binary built here, so the bench command cannot rot; it asserts no
// speed and no memory figure, only that each line is printed.
func TestScaleSmall(t *testing.T) {
	bin := buildSessionlog(t)
	var out bytes.Buffer
	err := Scale(context.Background(), ScaleOptions{
		Out: &out, Binary: bin,
		Sessions: 40, Window: 4, EventsPerSession: 10, Concurrency: 4, Partitions: 1, LeaseTTL: time.Second,
		ClusterSessions: 4, ClusterRounds: 1, ClusterRound: 300 * time.Millisecond,
		CatchupEvents: 2000, CatchupSessions: 20, CatchupTrials: 1,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, name := range []string{"scale-flat", "scale-rss-writer", "scale-rss-repairer", "scale-partitions", "scale-catchup"} {
		if !strings.Contains(out.String(), "BENCH name="+name+" ") {
			t.Errorf("no %s line in:\n%s", name, out.String())
		}
	}
	// Where the CPU went, P=1 against P=3: each session stream named with
	// its leader, and every part of the split present.
	for _, want := range []string{" busy_cores_p1=", " busy_cores_p3=", " cpu_split_p1=S-1:", ",SESSIONS@S-", " cpu_split_p3=S-1:",
		",SESSIONS-0@S-", ",SESSIONS-1@S-", ",SESSIONS-2@S-", ",writer:", ",load:", ",runtime:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the scale-partitions line:\n%s", want, out.String())
		}
	}
}

// buildSessionlog builds the sessionlog binary in a temporary directory:
// the benchmarks run its services as processes of their own.
func buildSessionlog(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sessionlog")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sessionlog/sessionlog/cmd/sessionlog").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
