package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestAnswersBounded runs the answers benchmark on a session of 100,000
// events (26 MiB as sessionlog's own export; the benchmark's default is a
// million, too long for a test) with the projector's heap budget at 64 MiB:
// 20 clients that ask for each answer and never read it leave the
// projector's peak RSS under the budget, 4 MiB for each client (a page
// read, a page written and their garbage) and 64 MiB for the rest (the
// runtime, Pebble, NATS buffers, the folds of the four agent-format
// exports that run at a time). Built whole as before, the 20 answers of /context took the
// peak RSS from 104 to 240 MiB on 40,000 events.
func TestAnswersBounded(t *testing.T) {
	bin := buildSessionlog(t)
	const budget = 64 << 20
	var out, progress bytes.Buffer
	figs, err := Answers(context.Background(), AnswersOptions{
		Out: &out, Progress: &progress, Binary: bin, Events: 100_000, EventBytes: 230,
		Clients: 20, Hold: 4 * time.Second, MemoryLimit: "64MiB", WriteTimeout: 3 * time.Second,
	})
	t.Logf("%s%s", progress.String(), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "BENCH name=answers-rss "); got != len(AnswerPaths) {
		t.Errorf("%d BENCH lines, want %d", got, len(AnswerPaths))
	}
	const margin = 20*(4<<20) + 64<<20
	for _, f := range figs {
		if f.RSSPeak > budget+margin {
			t.Errorf("%s: peak RSS %.0f MiB with 20 clients that do not read, over the budget of %d MiB + %d MiB", f.Path, mib(f.RSSPeak), budget>>20, margin>>20)
		}
	}
}
