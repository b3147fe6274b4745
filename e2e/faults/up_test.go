package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/faultfs"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
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
	// damaged: the log lost what up had stored (a corruption), so up is
	// ready once everything but the projector's log_rolled_back is.
	damaged bool
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
		faultCheckRaces(t, dir)
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
	cmd := exec.Command(faultBinary(u.t), "up", "--data-dir", u.fs.Dir(), "--sync", string(u.sync),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(u.natsPort), "--http-listen", "127.0.0.1:"+strconv.Itoa(u.httpPort),
		"--lease-ttl", "12s", "--grace", "1s")
	log := filepath.Join(u.dir, "up.log")
	u.proc = faultStartCmd(u.t, "up", cmd, log)
	natstest.CheckFor(u.t, 60*time.Second, 100*time.Millisecond, func() error {
		if !u.proc.running() {
			return fmt.Errorf("up exited: %v\n%s", u.proc.err, faultLogTail(log, 3000))
		}
		checks, err := u.readyz()
		if err != nil {
			return err
		}
		for name, v := range checks {
			if v != "ok" && !(u.damaged && strings.Contains(v, projector.CodeLogRolledBack)) {
				return fmt.Errorf("readyz: %s: %s", name, v)
			}
		}
		return nil
	})
}

// readyz is up's readiness checks, each "ok" or why not.
func (u *faultUp) readyz() (map[string]string, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://127.0.0.1:" + strconv.Itoa(u.httpPort) + "/readyz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("readyz: %s: %w", resp.Status, err)
	}
	return body.Checks, nil
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
	return startFaultUpRunWith(t, sync, false)
}

// startFaultUpRunWith: flagged lets agents be answered rolled_back or
// unreadable (faultFleetConfig.Flagged), for the faults that damage the
// only copy of the log.
func startFaultUpRunWith(t *testing.T, sync faultSync, flagged bool) *faultUpRun {
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
		Seed: uint64(r.start.UnixNano()), Flagged: flagged,
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
	stored, problems := r.dump(t)
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
	w.Detail = "node=up sync=always " + r.up.powerLoss() + " " + r.serverLost(t)
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
	w.Detail = "node=up sync=interval " + r.up.powerLoss() + " " + r.serverLost(t)
	w.End = time.Now()
	faultAssertLoss(t, r.check(t, []faultWindow{w}), "R1")
}

// TestFaultsUpDiskFull: up's disk fills mid-load (every write that grows a
// file fails with ENOSPC). While it is full, /readyz says not ready and
// why, and an append answers a definite error (not_committed: nothing
// stored) rather than hanging to a timeout; once space is freed, appends
// succeed again in the same process, without a restart. Nothing
// acknowledged is lost, nothing is stored twice, every history is
// linearizable.
func TestFaultsUpDiskFull(t *testing.T) {
	r := startFaultUpRun(t, faultSyncAlways)
	u := r.up
	pid := u.proc.cmd.Process.Pid
	time.Sleep(3 * time.Second)
	w := faultWindow{Name: "disk_full", Start: time.Now()}
	u.fs.SetSpace(0)
	var reason string
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		checks, err := u.readyz()
		if err != nil {
			return err
		}
		for name, v := range checks {
			if strings.Contains(v, "no space left") {
				reason = name + ": " + v
				return nil
			}
		}
		return fmt.Errorf("readyz does not say the disk is full: %v", checks)
	})
	full := time.Now()
	t.Logf("readyz while full: %s", reason)
	// An append sent now is answered not_committed, once (no retry of an
	// unknown outcome in the client).
	probe := fmt.Sprintf("full-%d", full.UnixNano())
	cl := client.New(r.nc, client.WithTimeout(4*time.Second), client.WithRetries(0))
	_, perr := cl.Append(context.Background(), client.AppendRequest{SessionID: probe, ExpectedSeq: client.Seq(0), Holder: "probe",
		Events: []schema.Envelope{{Type: schema.TypeSessionCreated, Data: mustJSON(schema.SessionCreated{Title: "disk full", Agent: "probe"})}}})
	if client.CodeOf(perr) != schema.CodeNotCommitted {
		t.Errorf("an append while the disk is full answered %v (%s), want not_committed", client.CodeOf(perr), perr)
	}
	t.Logf("append while full: %v", perr)
	// The disk stays full for 5 s more: the fleet keeps sending.
	time.Sleep(5 * time.Second)
	freed := time.Now()
	u.fs.SetSpace(-1)
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if !u.proc.running() {
			return fmt.Errorf("up exited: %v", u.proc.err)
		}
		checks, err := u.readyz()
		if err != nil {
			return err
		}
		for name, v := range checks {
			if v != "ok" {
				return fmt.Errorf("readyz after space was freed: %s: %s", name, v)
			}
		}
		return nil
	})
	ready := time.Now()
	if !u.proc.running() || u.proc.cmd.Process.Pid != pid {
		t.Fatalf("up was restarted")
	}
	w.End = time.Now()
	// What the appends sent while the disk was known full were answered.
	answers := map[string]int{}
	r.fleet.mu.Lock()
	for _, b := range r.fleet.batches {
		for _, a := range b.Attempts {
			if a.Start.After(full) && a.End.Before(freed) {
				answers[a.Result]++
			}
		}
	}
	r.fleet.mu.Unlock()
	w.Detail = fmt.Sprintf("node=up sync=always full_ms=%d recovered_ms=%d answers_while_full=%v restarted=false",
		freed.Sub(w.Start).Milliseconds(), ready.Sub(freed).Milliseconds(), answers)
	r.finish(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if evs, _, err := r.st.ReadEvents(ctx, probe, 0); len(evs) > 0 {
		t.Errorf("the append answered not_committed while the disk was full stored %d events (%v)", len(evs), err)
	}
	if answers[string(schema.CodeNotCommitted)] == 0 {
		t.Errorf("no append sent while the disk was full was answered not_committed: %v", answers)
	}
	if n := answers[string(schema.CodeOutcomeUnknown)]; n > 0 {
		t.Errorf("%d appends sent while the disk was known full were left outcome_unknown: %v", n, answers)
	}
	after := 0
	for _, ok := range r.fleet.oks {
		if ok.T.After(ready) {
			after += ok.Events
		}
	}
	if after == 0 {
		t.Errorf("no append was acknowledged after space was freed")
	}
	// The services go on in the same process: up's projector shows every
	// session at its stored last seq, read across JetStream's restart.
	stored, _ := r.dump(t)
	waited := time.Now()
	faultProjectorCaughtUp(t, "127.0.0.1:"+strconv.Itoa(u.httpPort), stored)
	t.Logf("DISKFULL reason=%q acked_after_free=%d projector_caught_up_ms=%d", reason, after, time.Since(waited).Milliseconds())
}

// faultUpPause is how long the pause fault freezes up: twice the fleet's
// request timeout, so that requests in flight time out (outcome_unknown)
// and are retried against a process that wakes up with them half done.
const faultUpPause = 8 * time.Second

// pause freezes up (SIGSTOP) for d and thaws it (SIGCONT).
func (u *faultUp) pause(d time.Duration) string {
	_ = u.proc.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = u.proc.cmd.Process.Signal(syscall.SIGCONT)
	return fmt.Sprintf("node=up sync=%s paused_ms=%d", u.sync, d.Milliseconds())
}

// corrupt kills up, damages a block file of the session stream that has
// most data on disk (corrupt_bit: one bit flipped at a random offset of a
// random block; corrupt_truncate: the last block cut to half), and starts
// up again.
func (u *faultUp) corrupt(name string, streams []string, rng *rand.Rand) string {
	u.t.Helper()
	u.proc.kill()
	store := filepath.Join(u.fs.Dir(), "nats")
	var (
		blocks []faultBlock
		stream string
		most   int64
	)
	for _, s := range streams {
		bs := faultBlocks(store, s)
		var size int64
		for _, b := range bs {
			size += b.size
		}
		if size > most {
			blocks, stream, most = bs, s, size
		}
	}
	if len(blocks) == 0 {
		u.t.Fatalf("%s: no block files of %v under %s", name, streams, store)
	}
	detail := fmt.Sprintf("node=up sync=%s stream=%s", u.sync, stream)
	if name == "corrupt_bit" {
		b := blocks[rng.IntN(len(blocks))]
		off, bit := rng.Int64N(b.size), uint(rng.IntN(8))
		if err := u.fs.FlipBit(filepath.Join("nats", b.rel), off, bit); err != nil {
			u.t.Fatalf("%s: %v", name, err)
		}
		detail += fmt.Sprintf(" file=%s size=%d offset=%d bit=%d", filepath.Base(b.rel), b.size, off, bit)
	} else {
		b := blocks[len(blocks)-1]
		cut := max(b.size/2, 1)
		size, err := u.fs.TruncateTail(filepath.Join("nats", b.rel), cut)
		if err != nil {
			u.t.Fatalf("%s: %v", name, err)
		}
		detail += fmt.Sprintf(" file=%s size=%d cut=%d", filepath.Base(b.rel), size+cut, cut)
	}
	u.damaged = true
	u.start()
	return detail
}

// TestFaultsUpPause: up is frozen (SIGSTOP) for longer than the fleet's
// request timeout mid-load, then thawed: requests it held answer late or
// not at all, their retries meet the first sends; nothing acknowledged is
// lost, nothing stored twice, every history linearizable. The fault must
// bite: some request has to have timed out during the pause.
func TestFaultsUpPause(t *testing.T) {
	r := startFaultUpRun(t, faultSyncAlways)
	time.Sleep(4 * time.Second)
	w := faultWindow{Name: "pause", Start: time.Now()}
	w.Detail = r.up.pause(faultUpPause)
	w.End = time.Now()
	r.finish(t, w)
	unknown := 0
	for _, b := range r.fleet.batches {
		for _, a := range b.Attempts {
			if a.Result == string(schema.CodeOutcomeUnknown) || a.Sends > 1 {
				unknown++
			}
		}
	}
	if unknown == 0 {
		t.Errorf("no append timed out during a %v pause: the fault did not bite", faultUpPause)
	}
	t.Logf("PAUSE appends with an unknown outcome or a re-send: %d", unknown)
}

// TestFaultsUpCorrupt: up is killed, one block file of its session stream
// damaged on disk (a bit flipped, or the tail cut), and up restarted on
// it. One node has no replica to repair from, so events may be lost or
// changed; what must hold is that no loss is silent: every session the
// checker finds damaged (acknowledged events lost, moved or changed, a
// gap, a duplicate, a history not linearizable) is named by verify (the
// SL-Prev chain), or its agent was answered rolled_back or unreadable, or
// the projector raised log_rolled_back for the stream; every other
// session keeps every guarantee.
func TestFaultsUpCorrupt(t *testing.T) {
	for _, name := range []string{"corrupt_bit", "corrupt_truncate"} {
		t.Run(name, func(t *testing.T) { testFaultsUpCorrupt(t, name) })
	}
}

func testFaultsUpCorrupt(t *testing.T, name string) {
	r := startFaultUpRunWith(t, faultSyncAlways, true)
	rng := rand.New(rand.NewPCG(uint64(r.start.UnixNano()), 29))
	time.Sleep(4 * time.Second)
	w := faultWindow{Name: name, Start: time.Now()}
	w.Detail = r.up.corrupt(name, r.st.Streams(), rng) + " " + r.serverLost(t)
	w.End = time.Now()
	time.Sleep(3 * time.Second)
	r.stopFleet(t)
	for _, e := range r.fleet.errs {
		t.Errorf("fleet: %s", e)
	}
	stored, problems := r.dump(t)
	httpAddr := "127.0.0.1:" + strconv.Itoa(r.up.httpPort)
	verify, verifyN := faultRunVerify(t, r.up.URL(), httpAddr)
	j := faultJudgeDamage(t, r.fleet, stored, problems, verify, verifyN, faultRolledBack(t, httpAddr))
	w.Detail += " " + j.String()
	rep := faultCheck(stored, r.fleet.batches, r.fleet.forks, r.fleet.sessions, problems)
	faultReportRun(t, r.fleet, rep, []faultWindow{w}, time.Second, r.start, time.Now())
	for _, s := range j.silent {
		t.Errorf("silent loss: %s", s)
	}
	if name == "corrupt_truncate" && len(j.damaged) == 0 {
		// Half of the stream's last block holds events acknowledged
		// under fsync before ack: cutting it must lose some.
		t.Errorf("%s damaged no session: the fault did not bite (%s)", name, w.Detail)
	}
	// Outside the damaged sessions every guarantee holds.
	faultAssert(t, j.rest)
}

// serverLost is what nats-server says it lost of each stream when it
// recovered its files (DESIGN.md section 5), for the fault's line:
// server_lost=none, or each stream's count of named seqs and bytes.
func (r *faultUpRun) serverLost(t *testing.T) string {
	t.Helper()
	var out []string
	for _, name := range r.st.Streams() {
		var ld *logstore.LostData
		natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() (err error) {
			ld, err = r.st.ServerLost(context.Background(), name)
			return err
		})
		if ld != nil {
			out = append(out, fmt.Sprintf("%s:seqs=%d,bytes=%d", name, len(ld.Msgs), ld.Bytes))
		}
	}
	if len(out) == 0 {
		return "server_lost=none"
	}
	return "server_lost=" + strings.Join(out, ";")
}

// dump reads every session stream.
func (r *faultUpRun) dump(t *testing.T) (map[string][]faultStored, []string) {
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
	t.Logf("stream: %d messages, %d sessions, %d unreadable messages", n, len(stored), len(problems))
	return stored, problems
}

// faultDamage is the verdict on a damaged single copy of the log.
type faultDamage struct {
	// damaged: the fleet's sessions the checker finds a fault in, each
	// judged alone, with what it found.
	damaged map[string]string
	// How each was surfaced: verify's problems by session, the agents'
	// rolled_back / unreadable answers, up's log_rolled_back reason.
	verify     map[string][]string
	verifyN    int
	flagged    map[string]string
	rolledBack string
	// silent: damage nothing surfaced.
	silent []string
	// rest: the checker over the undamaged sessions.
	rest *faultReport
}

func (d *faultDamage) String() string {
	return fmt.Sprintf("damaged=%d verify_problems=%d verify_sessions=%d flagged=%d log_rolled_back=%v silent=%d",
		len(d.damaged), d.verifyN, len(d.verify), len(d.flagged), d.rolledBack != "", len(d.silent))
}

// faultJudgeDamage finds the damaged sessions and how each was surfaced.
// Messages the dump could not read as events (problems) are damage too:
// verify must name them.
func faultJudgeDamage(t *testing.T, fleet *faultFleet, stored map[string][]faultStored, problems []string, verify map[string][]string, verifyN int, rolledBack string) *faultDamage {
	t.Helper()
	d := &faultDamage{damaged: map[string]string{}, flagged: fleet.flagged, verify: verify, verifyN: verifyN, rolledBack: rolledBack}
	bySession := map[string][]*faultBatch{}
	for _, b := range fleet.batches {
		bySession[b.Session] = append(bySession[b.Session], b)
	}
	for sid, rec := range fleet.sessions {
		one := map[string][]faultStored{}
		if evs, ok := stored[sid]; ok {
			one[sid] = evs
		}
		rep := faultCheck(one, bySession[sid], nil, map[string]*faultSessionRec{sid: rec}, nil)
		if !rep.OK() {
			d.damaged[sid] = fmt.Sprintf("%s %v", rep, rep.Problems)
		}
	}
	for sid, what := range d.damaged {
		if len(d.verify[sid]) == 0 && d.flagged[sid] == "" && d.rolledBack == "" {
			d.silent = append(d.silent, fmt.Sprintf("%s: %s", sid, what))
		}
		t.Logf("DAMAGED %s verify=%q flagged=%q: %s", sid, d.verify[sid], d.flagged[sid], what)
	}
	if len(problems) > 0 && d.verifyN == 0 && d.rolledBack == "" {
		d.silent = append(d.silent, fmt.Sprintf("%d stored messages are not readable events (%s) and verify names none", len(problems), problems[0]))
	}
	if d.rolledBack != "" {
		t.Logf("ROLLED_BACK %s", d.rolledBack)
	}
	sort.Strings(d.silent)
	// The checker over the rest: forks touching a damaged session left out.
	rest := map[string][]faultStored{}
	for sid, evs := range stored {
		if d.damaged[sid] == "" {
			rest[sid] = evs
		}
	}
	var batches []*faultBatch
	for _, b := range fleet.batches {
		if d.damaged[b.Session] == "" {
			batches = append(batches, b)
		}
	}
	sessions := map[string]*faultSessionRec{}
	for sid, rec := range fleet.sessions {
		if d.damaged[sid] == "" {
			sessions[sid] = rec
		}
	}
	var forks []*faultFork
	for _, f := range fleet.forks {
		if d.damaged[f.Parent] == "" && len(d.verify[f.Child]) == 0 {
			forks = append(forks, f)
		}
	}
	d.rest = faultCheck(rest, batches, forks, sessions, nil)
	return d
}

// faultRunVerify runs `sessionlog verify --json` against the NATS URL(s),
// holding the log to what the projector at httpAddr shows, and returns its
// problems by session, and how many there are.
func faultRunVerify(t *testing.T, url, httpAddr string) (map[string][]string, int) {
	t.Helper()
	cmd := exec.Command(faultBinary(t), "verify", "--json", "--nats-url", url, "--http-url", "http://"+httpAddr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("verify: %v", err)
	}
	for _, r := range faultRaceReports(stderr.String()) {
		t.Errorf("DATA RACE in verify:\n%s", r)
	}
	by := map[string][]string{}
	n := 0
	for line := range strings.Lines(string(out)) {
		var p struct {
			Session, Stream, Kind, Message string
			Seq                            uint64
		}
		if json.Unmarshal([]byte(line), &p) != nil || p.Kind == "" {
			continue
		}
		n++
		if p.Session == "" { // of a whole stream: what the server lost of it
			t.Logf("VERIFY stream=%s %s: %s", p.Stream, p.Kind, p.Message)
			continue
		}
		by[p.Session] = append(by[p.Session], fmt.Sprintf("seq %d %s: %s", p.Seq, p.Kind, p.Message))
	}
	if err != nil && n == 0 {
		t.Fatalf("verify failed without naming a problem: %v\n%s%s", err, out, stderr.String())
	}
	t.Logf("VERIFY problems=%d sessions=%d", n, len(by))
	return by, n
}

// faultRolledBack is /readyz's answer at addr (up's JSON checks, or a
// projector's text) when it names log_rolled_back, once the projector has
// compared the streams with what it consumed (it does every 2 s, and at
// start against its checkpoint); empty if it is not raised.
func faultRolledBack(t *testing.T, addr string) string {
	t.Helper()
	time.Sleep(3 * time.Second)
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	if strings.Contains(string(body), projector.CodeLogRolledBack) {
		return strings.TrimSpace(string(body))
	}
	return ""
}
