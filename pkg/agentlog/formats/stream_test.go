package formats_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

var recordSums = flag.Bool("record-sums", false, "rewrite testdata/whole-export-sums.txt from the exports made now")

// sumsFile holds the size and SHA-256 of every export of exportCases as
// the exporters wrote it when they built it from the whole session in
// memory (recorded at the commit before they streamed).
const sumsFile = "testdata/whole-export-sums.txt"

// exportCase is a session exported to a format.
type exportCase struct {
	name   string
	to     agentlog.Format
	events []schema.Envelope
}

// exportCases are the sessions of every real transcript and every fixture
// file, each exported to every format: as read, as from elsewhere (from
// its events), repaired, repaired from elsewhere, with the first events at
// the epoch, and with a rewind to the middle followed by its repair.
func exportCases(t *testing.T) []exportCase {
	var files []struct {
		f    agentlog.Format
		path string
	}
	add := func(f agentlog.Format, glob string) {
		for _, p := range agentlogtest.Files(t, glob) {
			files = append(files, struct {
				f    agentlog.Format
				path string
			}{f, p})
		}
	}
	for _, r := range real {
		add(r.f, filepath.Join("..", "testdata", "real", r.dir, "*.jsonl"))
	}
	add(claudecode.Format{}, "../claudecode/testdata/projects/*/*.jsonl")
	add(claudecode.Format{}, "../claudecode/testdata/projects/*/*/subagents/*.jsonl")
	add(codex.Format{}, "../codex/testdata/sessions/*/*/*/*.jsonl")
	add(pi.Format{}, "../pi/testdata/sessions/*/*.jsonl")
	var out []exportCase
	for _, file := range files {
		c, _, _ := agentlogtest.Read(t, file.f, file.path)
		for n, s := range c.Sessions {
			base := file.f.Name() + "/" + filepath.Base(file.path) + fmt.Sprintf("#%d", n)
			variants := map[string][]schema.Envelope{"read": s.Events}
			variants["elsewhere"] = agentlogtest.FromElsewhere(s.Events)
			if r := repaired(s.Events); r != nil {
				variants["repaired"] = r
				variants["repaired-elsewhere"] = agentlogtest.FromElsewhere(r)
			}
			epoch := agentlogtest.FromElsewhere(s.Events)
			for i := range epoch[:min(5, len(epoch))] {
				epoch[i].Time = time.Unix(0, 0).UTC()
			}
			variants["epoch"] = epoch
			if r := rewound(s.Events); r != nil {
				variants["rewound"] = r
				variants["rewound-elsewhere"] = agentlogtest.FromElsewhere(r)
			}
			for v, events := range variants {
				for _, to := range all {
					out = append(out, exportCase{name: base + "/" + v + "/" + to.Name(), to: to, events: events})
				}
			}
		}
	}
	// A chat as the benchmarks make it (a compaction, and rewinds every
	// 7th and 50th turn in the second), 2,000-odd events.
	for _, rewinds := range []bool{false, true} {
		var events []schema.Envelope
		for e := range gen.Chat("chat", 250, 230, rewinds, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
			events = append(events, e)
		}
		for _, to := range all {
			out = append(out, exportCase{name: fmt.Sprintf("chat/rewinds=%v/%s", rewinds, to.Name()), to: to, events: events})
		}
	}
	return out
}

// repaired is events followed by the repair of what they leave open (nil:
// nothing open).
func repaired(events []schema.Envelope) []schema.Envelope {
	st := session.New(events[0].SessionID)
	for i := range events {
		if st.Apply(&events[i]) != nil {
			return nil
		}
	}
	repair := session.PlanRepair(st, session.RepairOptions{Now: st.LastTime})
	if len(repair) == 0 {
		return nil
	}
	return append(append([]schema.Envelope(nil), events...), repair...)
}

// rewound is events followed by a context/rewound to the model-visible
// event at about their middle, then the repair of what is open (nil: the
// session does not fold so).
func rewound(events []schema.Envelope) []schema.Envelope {
	var to *schema.Envelope
	for i := len(events) / 2; i < len(events); i++ {
		switch events[i].Type {
		case schema.TypeMessageUser, schema.TypeMessageAssistant, schema.TypeToolResult:
			to = &events[i]
		}
		if to != nil {
			break
		}
	}
	if to == nil {
		return nil
	}
	last := events[len(events)-1]
	data, _ := json.Marshal(schema.ContextRewound{ToEventID: to.EventID, ToSeq: to.Seq})
	rw := schema.Envelope{SessionID: last.SessionID, Seq: last.Seq + 1, EventID: "test-rewind-" + to.EventID, Type: schema.TypeContextRewound,
		Time: last.Time, Data: data}
	out := append(append([]schema.Envelope(nil), events...), rw)
	st := session.New(out[0].SessionID)
	for i := range out {
		if st.Apply(&out[i]) != nil {
			return nil
		}
	}
	return append(out, session.PlanRepair(st, session.RepairOptions{Now: st.LastTime})...)
}

func sumOf(b []byte) string { return fmt.Sprintf("%d %x", len(b), sha256.Sum256(b)) }

// TestExportsEqualWholeSessionExports: every export of exportCases is
// byte for byte the one the exporters wrote from the whole session in
// memory (their size and SHA-256 in testdata/whole-export-sums.txt).
func TestExportsEqualWholeSessionExports(t *testing.T) {
	cases := exportCases(t)
	if *recordSums {
		var b strings.Builder
		for _, c := range cases {
			fmt.Fprintf(&b, "%s %s\n", c.name, sumOf(agentlogtest.Export(t, c.to, c.events)))
		}
		if err := os.WriteFile(sumsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(sumsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, sum, _ := strings.Cut(sc.Text(), " ")
		want[name] = sum
	}
	if len(want) != len(cases) {
		t.Errorf("%d recorded exports, %d cases", len(want), len(cases))
	}
	for _, c := range cases {
		if got := sumOf(agentlogtest.Export(t, c.to, c.events)); got != want[c.name] {
			t.Errorf("%s: export %s, want %s as built whole", c.name, got, want[c.name])
		}
	}
}
