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
	bin := filepath.Join(t.TempDir(), "sessionlog")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sessionlog/sessionlog/cmd/sessionlog").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
}
