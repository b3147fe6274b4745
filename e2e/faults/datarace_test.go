package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/testbin"
)

// Under -race every child runs race-instrumented too: the nodes and the
// services are this test binary, up and verify the binary built with
// -race. A child's race report goes to its log, never to this process,
// and a child killed with SIGKILL has no exit status to tell of it, so
// the harness reads the logs for reports when a test ends.

// faultBinary is the sessionlog binary the tests run: built with the race
// detector when the tests are.
func faultBinary(t *testing.T) string {
	t.Helper()
	if faultRace {
		return testbin.RacePath(t)
	}
	return testbin.Path(t)
}

// faultKnownRaces are races the detector reports inside nats-server
// v2.15.3 itself (not patched here), each named by a function in the stack
// of one access and one in the other's: a report whose accesses match a
// pair here is logged, any other fails the test.
var faultKnownRaces = [][2]string{
	// EnableJetStream after ShutdownJetStream (up's store watch restarts
	// JetStream once its disk has room again, TestFaultsUpDiskFull):
	// setJetStreamExportSubs stores new API request queues in
	// s.jsAPIRoutedReqs and s.jsAPIRoutedInfoReqs (jetstream_api.go:1114,
	// :1115) without the server's lock while apiDispatch, on the reading
	// connection of a client that sent a JetStream API request, loads them
	// (:1028, :1031) to push the request: the detector reports the pointer,
	// and each field of the new queue that newIPQueue wrote (ipqueue.go:88)
	// and push reads (ipqueue.go:116-137; the CAS at :1034).
	{"(*Server).setJetStreamExportSubs()", "(*jetStream).apiDispatch()"},
}

// faultCheckRaces reads every child log in dir for race reports: a known
// one of nats-server's is logged as RACE, any other fails the test with
// the report.
func faultCheckRaces(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Errorf("race check: %v", err)
			continue
		}
		for _, r := range faultRaceReports(string(b)) {
			if k := faultKnownRace(r); k != "" {
				t.Logf("RACE known in nats-server, %s: %s", filepath.Base(l), k)
				continue
			}
			t.Errorf("DATA RACE in %s:\n%s", filepath.Base(l), r)
		}
	}
}

// faultRaceReports cuts the race detector's reports out of a log: each
// starts with "WARNING: DATA RACE" and ends at the next line of "=".
func faultRaceReports(log string) []string {
	var reports []string
	for {
		i := strings.Index(log, "WARNING: DATA RACE")
		if i < 0 {
			return reports
		}
		log = log[i:]
		end := strings.Index(log, "\n==================")
		if end < 0 {
			end = len(log)
		}
		reports = append(reports, log[:end])
		log = log[end:]
	}
}

// faultRaceAccesses are the stacks of a report's accesses, each from its
// header ("Write at 0x… by goroutine 7:", "Previous read at …") to the
// blank line after it.
func faultRaceAccesses(report string) []string {
	var stacks []string
	for _, para := range strings.Split(report, "\n\n") {
		para = strings.TrimPrefix(para, "WARNING: DATA RACE\n")
		head, _, _ := strings.Cut(para, "\n")
		if strings.Contains(head, " at 0x") && strings.HasSuffix(head, ":") {
			stacks = append(stacks, para)
		}
	}
	return stacks
}

// faultKnownRace names the known race a report is (the innermost
// nats-server place of each access), or is empty.
func faultKnownRace(report string) string {
	stacks := faultRaceAccesses(report)
	if len(stacks) != 2 {
		return ""
	}
	for _, k := range faultKnownRaces {
		if strings.Contains(stacks[0], k[0]) && strings.Contains(stacks[1], k[1]) ||
			strings.Contains(stacks[0], k[1]) && strings.Contains(stacks[1], k[0]) {
			return faultRaceSite(stacks[0]) + " against " + faultRaceSite(stacks[1])
		}
	}
	return ""
}

// faultRaceSite is the first file:line of a stack in nats-server's
// source: where in the server the access is.
func faultRaceSite(stack string) string {
	for line := range strings.Lines(stack) {
		line = strings.TrimSpace(line)
		if _, rest, ok := strings.Cut(line, "/nats-server/v2@"); ok {
			rest, _, _ = strings.Cut(rest, " ")
			return rest
		}
	}
	return "?"
}

// The harness tells nats-server's known race from any other: the reports
// of a JetStream restart under API requests (testdata, as the detector
// printed them) are known, with their places in the server; a report of
// the same shape with sessionlog code in one access is not.
func TestFaultRaceReports(t *testing.T) {
	b, err := os.ReadFile("testdata/nats-restart-race.txt")
	if err != nil {
		t.Fatal(err)
	}
	reports := faultRaceReports(string(b))
	if len(reports) != 2 {
		t.Fatalf("%d reports, want 2", len(reports))
	}
	want := []string{
		"v2.15.3/server/jetstream_api.go:1115 against v2.15.3/server/jetstream_api.go:1028",
		"v2.15.3/server/jetstream_api.go:1034 against v2.15.3/server/ipqueue.go:88",
	}
	for i, r := range reports {
		if got := faultKnownRace(r); got != want[i] {
			t.Errorf("report %d: known as %q, want %q", i, got, want[i])
		}
	}
	// Written for this test: a write in sessionlog's code against a read
	// in the server's.
	other := `WARNING: DATA RACE
Write at 0x00c00015ced0 by goroutine 12:
  github.com/sessionlog/sessionlog/cmd/sessionlog.(*storeWatch).set()
      /src/cmd/sessionlog/up_disk.go:90 +0x164

Previous read at 0x00c00015ced0 by goroutine 85:
  github.com/nats-io/nats-server/v2/server.(*jetStream).apiDispatch()
      /root/go/pkg/mod/github.com/nats-io/nats-server/v2@v2.15.3/server/jetstream_api.go:1028 +0xb50

Goroutine 85 (running) created at:
  github.com/nats-io/nats-server/v2/server.(*Server).setJetStreamExportSubs()
      /root/go/pkg/mod/github.com/nats-io/nats-server/v2@v2.15.3/server/jetstream_api.go:1115 +0x164
==================`
	rs := faultRaceReports("log line\n==================\n" + other + "\nlog line\n")
	if len(rs) != 1 {
		t.Fatalf("%d reports, want 1", len(rs))
	}
	if k := faultKnownRace(rs[0]); k != "" {
		t.Errorf("a race in sessionlog's code known as %q", k)
	}
}
