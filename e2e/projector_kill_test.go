package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A `sessionlog projector` process catching up on three partitions of a
// 3-node R3 cluster (every partition its own Raft group, leaders spread
// over the nodes) is killed with SIGKILL at random points, one partition's
// leader steps down in the middle, and each restart resumes from its
// checkpoint (one position per stream) instead of rebuilding. Once caught
// up and stopped, `sessionlog verify-projection` finds the checksum of its
// checkpoint, of its views and of a clean rebuild equal, and the
// checkpoint covers every event of the three streams. (The projector's own
// kill test does the same with 20 kills on one node:
// services/projector TestSIGKILLDuringCatchUpConverges.)
func TestProjectorSIGKILLDuringCatchUpP3R3(t *testing.T) {
	l := natstest.Layout{Partitions: 3, Nodes: 3}
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	// 30k events keep a catch-up at a few seconds on 2 cores, so that
	// every run is caught mid-way; 6 kills keep the test near half a
	// minute.
	total, sessions, kills := 30_000, 300, 6
	if testing.Short() {
		total, sessions = 6_000, 60
	}
	if _, err := gen.NewFleet("pk", sessions, 11, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)).Fill(ctx, st, total); err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)

	dir := filepath.Join(t.TempDir(), "views")
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 3))
	t.Logf("seed %d, %d events over %v", seed, total, st.Streams())
	args := []string{"--nats-url", d.URL, "--partitions", "3", "--replicas", "3", "--no-provision",
		"--data-dir", dir, "--max-batch-events", "300", "--log-level", "warn"}

	// applied counts what the runs killed so far folded (what a kill lost
	// of its last batch is folded again by the next run, so this is an
	// upper bound of the checkpoint): each kill lands in a share of what
	// is left, keeping room for the kills to come.
	var applied float64
	for i := range kills {
		span := max((float64(total)-applied)/float64(kills-i+1), 1)
		target := 1 + rnd.Float64()*span
		p := startProjectorProc(t, args)
		got := p.runUntil(t, func(n float64, ready bool) bool { return ready || n >= target })
		p.kill(t)
		p.checkResumed(t)
		applied += got
		t.Logf("kill %d after %.0f events folded (target %.0f)", i+1, got, target)
		if i == kills/2 {
			// A partition's leader moves while the projector is down:
			// the next run's consumer of that stream finds another node
			// leading it.
			stream := st.Streams()[1]
			before := d.Cluster.StreamLeader(stream)
			if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 5*time.Second); err != nil {
				t.Fatalf("step down %s: %v", stream, err)
			}
			natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
				if now := d.Cluster.StreamLeader(stream); now < 0 || now == before {
					return fmt.Errorf("%s still led by node %d", stream, now)
				}
				return nil
			})
			d.WaitLeaders(nc)
		}
	}
	// The last run catches up and stops cleanly (its final commits are
	// synced).
	p := startProjectorProc(t, args)
	p.runUntil(t, func(_ float64, ready bool) bool { return ready })
	p.stop(t)
	p.checkResumed(t)

	out, errOut, code := cli(t, nil, nil, "verify-projection", "--nats-url", d.URL, "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "\nOK\n") {
		t.Fatalf("verify-projection after %d SIGKILLs: exit %d\n%s%s", kills, code, out, errOut)
	}
	var covered, streams int
	for _, line := range strings.Split(out, "\n") {
		var name string
		var seq int
		if n, _ := fmt.Sscanf(line, "stream %s checkpoint at seq %d", &name, &seq); n == 2 {
			covered += seq
			streams++
		}
	}
	if covered != total || streams != l.Partitions {
		t.Fatalf("the checkpoint covers %d events in %d streams, the log holds %d in %d:\n%s", covered, streams, total, l.Partitions, out)
	}
	t.Logf("%s", out)
}

// projectorProc is a `sessionlog projector` child process.
type projectorProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuffer
	done   chan struct{}
}

func startProjectorProc(t *testing.T, args []string) *projectorProc {
	t.Helper()
	port, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &projectorProc{addr: "127.0.0.1:" + strconv.Itoa(port), stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(sessionlogBin(t), append([]string{"projector", "--http-listen", p.addr}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("projector stderr:\n%s", tailText(p.stderr.String(), 40))
		}
	})
	return p
}

// runUntil polls the process's /metrics and /readyz until stop says so,
// given the events it folded so far and whether it is ready (caught up),
// and returns the events folded.
func (p *projectorProc) runUntil(t *testing.T, stop func(applied float64, ready bool) bool) float64 {
	t.Helper()
	var applied float64
	natstest.CheckFor(t, 120*time.Second, 5*time.Millisecond, func() error {
		select {
		case <-p.done:
			t.Fatalf("projector exited: %s", tailText(p.stderr.String(), 40))
		default:
		}
		code, body, err := httpGet("http://" + p.addr + "/metrics")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("metrics: %d %v", code, err)
		}
		applied = metricValue(body, "sessionlog_projector_events_applied_total")
		code, _, err = httpGet("http://" + p.addr + "/readyz")
		if stop(applied, err == nil && code == http.StatusOK) {
			return nil
		}
		return fmt.Errorf("%.0f events folded, not there yet", applied)
	})
	return applied
}

func (p *projectorProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// stop ends the process with SIGTERM and expects a clean exit.
func (p *projectorProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("projector did not stop on SIGTERM: %s", tailText(p.stderr.String(), 40))
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("projector stopped with %v: %s", p.cmd.ProcessState, tailText(p.stderr.String(), 40))
	}
}

// checkResumed fails the test if the process rebuilt its views from the
// start of the streams: a crash must leave a store it resumes from (a
// rebuild would hide a broken one).
func (p *projectorProc) checkResumed(t *testing.T) {
	t.Helper()
	if s := p.stderr.String(); strings.Contains(s, "rebuilding views") {
		t.Fatalf("a restart rebuilt instead of resuming:\n%s", tailText(s, 20))
	}
}

// metricValue is the value of an unlabelled metric in a Prometheus text
// exposition, 0 when absent.
func metricValue(exposition, name string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
