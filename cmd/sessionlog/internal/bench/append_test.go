package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
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

// The writer scenarios send events as pkg/client does, and the writer
// stores each as it came (not encoded again, which a request of events
// without their time would make it do): the stored body is the sent one.
func TestWriterRequestStoredAsSent(t *testing.T) {
	ctx := context.Background()
	const sid = "stored-as-sent"
	tg := oneSession(t, sid)
	body, err := writerRequestBody(sid, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	var req struct{ Events []json.RawMessage }
	if err := json.Unmarshal(body, &req); err != nil || len(req.Events) != 3 {
		t.Fatalf("request %s: %v", body, err)
	}
	if err := sendWriterRequest(ctx, tg.nc, body); err != nil {
		t.Fatal(err)
	}
	loc, err := tg.st.Locate(sid)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := tg.js.Stream(ctx, loc.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for i, sent := range req.Events {
		// The stored events of the session are seqs 1 (its creation) to 4.
		m, err := stream.GetMsg(ctx, uint64(i+2))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != loc.Subject || !bytes.Equal(m.Data, sent) {
			t.Errorf("event %d stored on %s as\n%s\nsent as\n%s", i, m.Subject, m.Data, sent)
		}
	}
}

// oneSession starts an append target without group commit (the lazy
// writer of `bench append`), closed when tb ends, with session sid created.
func oneSession(tb testing.TB, sid string) *appendTarget {
	tb.Helper()
	ctx := context.Background()
	t, err := startAppendTarget(ctx, "sessionlog-bench-append-test-", false, false, logstore.Config{NoGroupCommit: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(t.close)
	if err := t.writerSetup(ctx, sid); err != nil {
		tb.Fatal(err)
	}
	return t
}
