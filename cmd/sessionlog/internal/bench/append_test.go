package bench

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The append benchmark runs and prints one well-formed BENCH line per
// scenario (figures are not asserted: targets belong to the benchmark).
func TestAppendBenchSmall(t *testing.T) {
	var out bytes.Buffer
	if err := Append(context.Background(), AppendOptions{Out: &out, Sessions: 4, DurableSessions: []int{4}, Duration: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^BENCH name=[a-z0-9-]+ value=\d+ unit=ev/s baseline=\d+ ratio=\d+\.\d\d p50=\d+\.\d{3} p99=\d+\.\d{3} baseline_p99=\d+\.\d{3} cpu_us_per_event=\d+\.\d( appends_per_commit=\d+\.\d refused_commits=\d+)?$`)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if !re.MatchString(l) {
			t.Errorf("malformed: %s", l)
		}
	}
}

// With partitions, the raw publishes on the durable server go to the
// sessions' partition subjects (the stream of no partition holds the
// unpartitioned ones).
func TestAppendBenchPartitions(t *testing.T) {
	var out bytes.Buffer
	if err := Append(context.Background(), AppendOptions{Out: &out, Sessions: 4, DurableSessions: []int{4}, DurablePartitions: 2,
		Only: []string{"raw-publish-sync-4", "writer-durable-4"}, Duration: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "BENCH "); n != 3 {
		t.Fatalf("%d lines:\n%s", n, out.String())
	}
}
