package session

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// TestForkCuts runs the scripts in testdata/fork. Commands:
//
//	events [id=<sessionId>]   a whole session, one event a line (the same
//	                          short form as testdata/rules); prints the safe
//	                          points and, per seq, what is open there
//	cut [seq=N] [turn=T]      resolves a cut against the last events; prints
//	                          "cut k" or the refusal with its nearest safe seqs
//	decided [seq=N] [turn=T]  for each prefix of the last events, whether a
//	                          scan for that cut could stop there and resolve
//	                          to the same answer as the whole session
//
// Every script also checks that the streaming scan (SafePoints.Add) and the
// whole-session ListSafePoints agree, and that a scan stopped early by
// Decided resolves to the same cut or error as the full scan.
func TestForkCuts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "fork"), func(t *testing.T, path string) {
		var events []schema.Envelope
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "events":
				id := "p"
				td.MaybeScanArgs(t, "id", &id)
				events = nil
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					e := sessiontest.Event(t, line)
					opt := schema.ValidateOptions{}
					if e.Synthetic {
						opt.Origin = schema.OriginService
					}
					if err := schema.Validate(e, opt); err != nil {
						t.Fatalf("%s: %v", line, err)
					}
					e.SessionID = id
					e.Seq = uint64(len(events) + 1)
					e.EventID = fmt.Sprintf("e%d", e.Seq)
					events = append(events, *e)
				}
				var out strings.Builder
				p := NewSafePoints(id)
				for i := range events {
					if err := p.Add(&events[i]); err != nil {
						fmt.Fprintf(&out, "seq %d refused: %v\n", i+1, err)
						events = events[:i]
						break
					}
					fmt.Fprintf(&out, "%d %s: %s\n", i+1, events[i].Type, openAt(p.State()))
					// The open index agrees with walking the whole state.
					st := p.State()
					pts := p.Points()
					fast := len(pts) > 0 && pts[len(pts)-1] == uint64(i+1)
					slow := st.Exists() && !st.Closed && !st.Forking && st.Turn == nil && len(st.OpenWork()) == 0
					if fast != slow {
						t.Fatalf("seq %d: SafePoints says safe=%v, the whole state says %v", i+1, fast, slow)
					}
				}
				all, err := ListSafePoints(events)
				if err != nil {
					t.Fatalf("ListSafePoints: %v", err)
				}
				if fmt.Sprint(all) != fmt.Sprint(p.Points()) {
					t.Fatalf("ListSafePoints %v, streaming scan %v", all, p.Points())
				}
				fmt.Fprintf(&out, "safe: %s\n", joinSeqs(p.Points()))
				return out.String()
			case "cut":
				c := forkTestCut(t, td)
				p := scan(t, events, len(events))
				k, err := p.Resolve(c)
				return renderCut(k, err)
			case "decided":
				c := forkTestCut(t, td)
				full := scan(t, events, len(events))
				wantK, wantErr := full.Resolve(c)
				var stops []string
				for n := 1; n <= len(events); n++ {
					p := scan(t, events, n)
					if !p.Decided(c) {
						continue
					}
					stops = append(stops, strconv.Itoa(n))
					k, err := p.Resolve(c)
					if renderCut(k, err) != renderCut(wantK, wantErr) {
						t.Fatalf("stopped at %d: %s, full scan: %s", n, renderCut(k, err), renderCut(wantK, wantErr))
					}
				}
				if len(stops) == 0 {
					return "never (needs the tail)\n"
				}
				return "from seq " + stops[0] + "\n"
			}
			t.Fatalf("unknown command %s", td.Cmd)
			return ""
		})
	})
}

func scan(t *testing.T, events []schema.Envelope, n int) *SafePoints {
	t.Helper()
	p := NewSafePoints(events[0].SessionID)
	for i := range events[:n] {
		if err := p.Add(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func forkTestCut(t *testing.T, td *datadriven.TestData) Cut {
	var c Cut
	if td.HasArg("seq") {
		var n uint64
		td.ScanArgs(t, "seq", &n)
		c.Seq = &n
	}
	td.MaybeScanArgs(t, "turn", &c.TurnID)
	return c
}

func renderCut(k uint64, err error) string {
	if err == nil {
		return fmt.Sprintf("cut %d\n", k)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "error %v\n", err)
	if e, ok := err.(*schema.Error); ok && (e.NearestSafeBefore != nil || e.NearestSafeAfter != nil) {
		fmt.Fprintf(&b, "nearestSafeBefore=%s nearestSafeAfter=%s\n", seqOrNone(e.NearestSafeBefore), seqOrNone(e.NearestSafeAfter))
	}
	return b.String()
}

func seqOrNone(p *uint64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatUint(*p, 10)
}

func joinSeqs(s []uint64) string {
	if len(s) == 0 {
		return "none"
	}
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(parts, " ")
}

// openAt says why a seq is or is not safe.
func openAt(s *State) string {
	if Safe(s) {
		return "safe"
	}
	var why []string
	if s.Forking {
		why = append(why, "forking")
	}
	if s.Closed {
		why = append(why, "closed")
	}
	if s.Turn != nil {
		why = append(why, "turn "+s.Turn.ID)
	}
	for _, it := range s.OpenWork() {
		why = append(why, fmt.Sprintf("%s %s", it.Kind, it.ID))
	}
	return "open: " + strings.Join(why, ", ")
}
