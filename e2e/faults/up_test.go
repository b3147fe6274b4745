package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/faultfs"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/testbin"
)

// `sessionlog up` (one R1 node and every service in one process) on a
// fault filesystem: its whole data directory is one disk that loses power.

// faultUp is one `sessionlog up` process on a fault filesystem, with
// fixed ports so that clients reconnect across restarts.
type faultUp struct {
	t                  *testing.T
	dir                string
	fs                 *faultfs.FS
	sync               faultSync
	natsPort, httpPort int
	proc               *faultProc
}

func startFaultUp(t *testing.T, sync faultSync) *faultUp {
	t.Helper()
	dir := t.TempDir()
	u := &faultUp{t: t, dir: dir, sync: sync, natsPort: faultPort(t), httpPort: faultPort(t)}
	fs, err := faultfs.Mount(filepath.Join(dir, "data"), filepath.Join(dir, "data.disk"))
	if err != nil {
		t.Fatalf("fault filesystem (needs root and /dev/fuse): %v", err)
	}
	u.fs = fs
	t.Cleanup(func() {
		u.proc.kill()
		if t.Failed() || os.Getenv("SESSIONLOG_FAULTS_LOGS") == "1" {
			faultDumpLogs(t, dir)
		}
		if keep := os.Getenv("SESSIONLOG_FAULTS_KEEP"); keep != "" {
			faultKeepLogs(t, dir, keep)
		}
		if err := fs.Unmount(); err != nil {
			t.Error(err)
		}
	})
	u.start()
	return u
}

// start runs up on the data directory and waits until it is ready.
func (u *faultUp) start() {
	u.t.Helper()
	cmd := exec.Command(testbin.Path(u.t), "up", "--data-dir", u.fs.Dir(), "--sync", string(u.sync),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(u.natsPort), "--http-listen", "127.0.0.1:"+strconv.Itoa(u.httpPort),
		"--lease-ttl", "12s", "--grace", "1s")
	log := filepath.Join(u.dir, "up.log")
	u.proc = faultStartCmd(u.t, "up", cmd, log)
	natstest.CheckFor(u.t, 60*time.Second, 100*time.Millisecond, func() error {
		if !u.proc.running() {
			return fmt.Errorf("up exited: %v\n%s", u.proc.err, faultLogTail(log, 3000))
		}
		return faultHTTPReady("127.0.0.1:" + strconv.Itoa(u.httpPort))
	})
}

func (u *faultUp) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", u.natsPort) }

// powerLoss kills up, drops every write it had not fsynced and starts
// it again.
func (u *faultUp) powerLoss() string {
	u.t.Helper()
	u.proc.kill()
	ls, err := u.fs.PowerLoss()
	if err != nil {
		u.t.Fatalf("power loss: %v", err)
	}
	for _, p := range ls.Paths {
		u.t.Logf("power loss of up: %s", p)
	}
	u.start()
	return "dropped=" + ls.String()
}

// faultUpRun is the fleet on one up process.
type faultUpRun struct {
	up    *faultUp
	nc    *nats.Conn
	st    *logstore.Store
	fleet *faultFleet
	stop  chan struct{}
	done  chan struct{}
	start time.Time
}

func startFaultUpRun(t *testing.T, sync faultSync) *faultUpRun {
	u := startFaultUp(t, sync)
	nc, err := nats.Connect(u.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := logstore.Open(context.Background(), nc, logstore.Config{Replicas: 1, NoProvision: true, LeaseTTL: 12 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := &faultUpRun{up: u, nc: nc, st: st, stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	r.fleet = newFaultFleet(faultFleetConfig{
		Agents: 8, URLs: func(int) string { return u.URL() }, Reader: st, Think: 100 * time.Millisecond, LeaseTTL: 12 * time.Second,
		Seed: uint64(r.start.UnixNano()),
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { r.fleet.Run(ctx, r.stop); close(r.done) }()
	return r
}

// stopFleet lets the agents close their sessions.
func (r *faultUpRun) stopFleet(t *testing.T) {
	close(r.stop)
	select {
	case <-r.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("fleet did not finish its sessions within 45s of the stop")
	}
}

// check reads every stream and holds the fleet's history against it.
func (r *faultUpRun) check(t *testing.T, windows []faultWindow) *faultReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, _ := jetstream.New(r.nc)
	var (
		stored   map[string][]faultStored
		n        int
		problems []string
	)
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		var err error
		stored, n, problems, err = faultDumpAll(ctx, js, r.st.Streams())
		return err
	})
	t.Logf("stream: %d messages, %d sessions", n, len(stored))
	rep := faultCheck(stored, r.fleet.batches, r.fleet.forks, r.fleet.sessions, problems)
	faultReportRun(t, r.fleet, rep, windows, time.Second, r.start, time.Now())
	return rep
}

// finish lets the fleet run 3 s past the fault window w, stops it, runs
// the checker and fails the test on any broken guarantee.
func (r *faultUpRun) finish(t *testing.T, w faultWindow) {
	t.Helper()
	time.Sleep(3 * time.Second)
	r.stopFleet(t)
	rep := r.check(t, []faultWindow{w})
	for _, e := range r.fleet.errs {
		t.Errorf("fleet: %s", e)
	}
	faultAssert(t, rep)
}

// TestFaultsUpPowerLoss: up with the sync policy it ships (fsync before
// every acknowledgement) loses power mid-load and restarts on what its
// disk kept: nothing acknowledged is lost.
func TestFaultsUpPowerLoss(t *testing.T) {
	r := startFaultUpRun(t, faultSyncAlways)
	time.Sleep(4 * time.Second)
	w := faultWindow{Name: "power_loss", Start: time.Now()}
	w.Detail = "node=up sync=always " + r.up.powerLoss()
	w.End = time.Now()
	r.finish(t, w)
}

// TestFaultsUpPowerLossLazy proves that the fault filesystem bites: up
// on the engine's lazy default (fsync every 2 minutes; the test is over
// long before the first) loses power after the fleet was told its events
// are committed, and the checker must find acknowledged events lost.
// Nothing the test wrote was fsynced, and the power loss drops all of it,
// so the loss is certain, not a race.
func TestFaultsUpPowerLossLazy(t *testing.T) {
	r := startFaultUpRun(t, faultSyncInterval)
	time.Sleep(4 * time.Second)
	r.stopFleet(t)
	w := faultWindow{Name: "power_loss", Start: time.Now()}
	w.Detail = "node=up sync=interval " + r.up.powerLoss()
	w.End = time.Now()
	faultAssertLoss(t, r.check(t, []faultWindow{w}), "R1")
}

// TestFaultsUpDiskFull: up's disk fills mid-load (every write that grows a
// file fails with ENOSPC); the fleet's appends are refused or left unknown
// and retried; space is freed and up restarted, as an operator would;
// nothing acknowledged is lost, and nothing is stored twice.
func TestFaultsUpDiskFull(t *testing.T) {
	r := startFaultUpRun(t, faultSyncAlways)
	u := r.up
	time.Sleep(3 * time.Second)
	w := faultWindow{Name: "disk_full", Start: time.Now()}
	u.fs.SetSpace(0)
	// The disk stays full for 5 s; whether up's readyz (which checks
	// JetStream) noticed is reported.
	readyz := "127.0.0.1:" + strconv.Itoa(u.httpPort)
	notReady := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		notReady = notReady || faultHTTPReady(readyz) != nil
	}
	u.fs.SetSpace(-1)
	// nats-server keeps failing the stream's writes after a write error
	// until it restarts: the operator frees space and restarts up.
	stopped := "sigterm"
	if err := u.proc.stop(10 * time.Second); err != nil {
		t.Logf("disk_full: %v", err)
		stopped = "sigkill"
	}
	u.start()
	w.End = time.Now()
	w.Detail = fmt.Sprintf("node=up sync=always readyz_failed=%v stopped_by=%s", notReady, stopped)
	r.finish(t, w)
}
