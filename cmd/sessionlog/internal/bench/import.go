package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ImportConfig is `sessionlog bench import`'s flags.
type ImportConfig struct {
	Files, Turns, Batch, Jobs, Rounds int
	CPUProfile                        string
}

// service is a service the bench runs beside the server.
type service interface {
	Run(ctx context.Context) error
	Ready() error
}

// Import runs `sessionlog bench import` (see the command's bench_import.go
// for what it measures) and prints its BENCH line to stdout.
func Import(ctx context.Context, cfg ImportConfig, stdout io.Writer) error {
	dir, cleanup, err := natstest.TempDir("sessionlog-bench-import-")
	if err != nil {
		return err
	}
	defer cleanup()
	src := filepath.Join(dir, "projects")
	bytesTotal, err := gen.ClaudeCodeFiles(src, cfg.Files, cfg.Turns)
	if err != nil {
		return err
	}
	paths, err := transfer.SessionFiles(claudecode.Format{}, []string{src})
	if err != nil {
		return err
	}

	// Floor 1: read and map every file, appending nothing.
	start := time.Now()
	var events int
	sessionsOf := make(map[string][]string, len(paths))
	for _, p := range paths {
		var c countSink
		if _, err := agentlog.ReadFile(claudecode.Format{}, p, agentlog.Options{}, &c); err != nil {
			return err
		}
		events += c.n
		sessionsOf[p] = c.ids
	}
	decode := float64(events) / time.Since(start).Seconds()
	// The peak so far is the mapping's alone (the server is not up yet):
	// it stays flat in the number of files; the final peak includes the
	// embedded server and its stream caches.
	decodeRSS := peakRSSMiB()

	srv, err := natstest.Start(natstest.Options(filepath.Join(dir, "nats")))
	if err != nil {
		return err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	wnc, err := nats.Connect(srv.ClientURL(), nats.InProcessServer(srv))
	if err != nil {
		return err
	}
	defer wnc.Close()
	st, err := logstore.Open(ctx, wnc, logstore.Config{})
	if err != nil {
		return err
	}
	w, err := assemble.NewWriter(assemble.DefaultWriter(), st, assemble.Deps{Conn: wnc})
	if err != nil {
		return err
	}
	// The source service records each file's transcript key, as import
	// asks once a file is in.
	sv, err := assemble.NewSource(assemble.DefaultSource(), st, assemble.Deps{Conn: wnc})
	if err != nil {
		return err
	}
	for _, svc := range []service{w, sv} {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		werr := make(chan error, 1)
		go func() { werr <- svc.Run(wctx) }()
		defer func() { stop(); <-werr }()
		for svc.Ready() != nil {
			select {
			case err := <-werr:
				return fmt.Errorf("%T: %v", svc, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	// The import runs as `sessionlog import --from claude-code` does: a
	// process of its own (this program's binary) talking to the server
	// over TCP, so that its peak resident set is the importer's alone;
	// this process holds the server, the writer and the source service.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The floor's connection is in-process like the writer's (the
	// importer's own requests to the writer go over TCP: that hop is
	// the project's).
	fnc, err := nats.Connect(srv.ClientURL(), nats.InProcessServer(srv))
	if err != nil {
		return err
	}
	defer fnc.Close()
	if cfg.CPUProfile != "" {
		stop, err := StartCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var (
		took, floorTook, importCPU, floorCPU time.Duration
		childCPU                             time.Duration
		appended, floorEvents                int
		storedBytes                          int64
		importRSS, serverRSS                 float64
	)
	per := (len(paths) + cfg.Rounds - 1) / cfg.Rounds
	for r := 0; r*per < len(paths); r++ {
		part := paths[r*per : min((r+1)*per, len(paths))]
		resetPeakRSS()
		start, cpu0 := time.Now(), cpuTime()
		run, err := importChild(ctx, exe, srv.ClientURL(), part, cfg.Batch, cfg.Jobs)
		if err != nil {
			return err
		}
		took += time.Since(start)
		importCPU += cpuTime() - cpu0 + run.cpu
		childCPU += run.cpu
		appended += run.events
		importRSS = max(importRSS, run.peakRSS)
		serverRSS = max(serverRSS, peakRSSMiB())

		var ids []string
		for _, p := range part {
			ids = append(ids, sessionsOf[p]...)
		}
		sessions, err := spoolSessions(ctx, st, filepath.Join(dir, "spool"), ids)
		if err != nil {
			return err
		}
		start, cpu0 = time.Now(), cpuTime()
		k, err := ImportFloor(ctx, fnc, sessions, cfg.Batch, cfg.Jobs)
		if err != nil {
			return err
		}
		floorTook += time.Since(start)
		floorCPU += cpuTime() - cpu0
		floorEvents += k
		for _, fs := range sessions {
			storedBytes += fs.Bytes
		}
	}
	if appended != events || floorEvents != events {
		return fmt.Errorf("bench import: %d events appended and %d in the floor, the mapping gives %d", appended, floorEvents, events)
	}
	rate := float64(appended) / took.Seconds()
	floor := float64(floorEvents) / floorTook.Seconds()
	fmt.Fprintf(stdout, "BENCH name=import value=%.0f unit=ev/s baseline=%.0f ratio=%.2f mb_per_s=%.1f decode_floor=%.0f peak_rss_mib=%.0f decode_peak_rss_mib=%.0f server_peak_rss_mib=%.0f files=%d mb=%.1f events=%d jobs=%d batch=%d rounds=%d stored_mb=%.1f cpu_us_per_ev=%.1f importer_cpu_us_per_ev=%.1f floor_cpu_us_per_ev=%.1f\n",
		rate, floor, rate/floor, float64(bytesTotal)/(1<<20)/took.Seconds(), decode, importRSS, decodeRSS, serverRSS, len(paths), float64(bytesTotal)/(1<<20), events, cfg.Jobs, cfg.Batch, cfg.Rounds, float64(storedBytes)/(1<<20),
		float64(importCPU.Microseconds())/float64(events), float64(childCPU.Microseconds())/float64(events), float64(floorCPU.Microseconds())/float64(events))
	return nil
}

// spoolSessions copies the stored messages of the sessions ids to a
// spool file each in dir, for the raw floor to publish again under an id
// of the same length ("floor-" in place of the id's first six
// characters: the bench's ids differ after them).
func spoolSessions(ctx context.Context, st *logstore.Store, dir string, ids []string) ([]FloorSession, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make([]FloorSession, 0, len(ids))
	for _, sid := range ids {
		if len(sid) <= 6 {
			return nil, fmt.Errorf("bench import: session id %q too short to rename", sid)
		}
		id := "floor-" + sid[6:]
		loc, err := st.Locate(id)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, id)
		sp, err := CreateSpool(path)
		if err != nil {
			return nil, err
		}
		_, err = st.ReadSession(ctx, sid, 0, sp.Add)
		n, size, cerr := sp.Close()
		if err = errors.Join(err, cerr); err != nil {
			return nil, fmt.Errorf("bench import: spool %s: %w", sid, err)
		}
		out = append(out, FloorSession{ID: id, Subject: loc.Subject, Spool: path, Events: n, Bytes: size})
	}
	return out, nil
}

// childImport is what one `sessionlog import --from claude-code` child did.
type childImport struct {
	events  int
	cpu     time.Duration // its user and system time
	peakRSS float64       // its peak resident set, MiB
}

// importChild runs `exe import --from claude-code` over files against
// the server at url and reads the events it appended from its summary
// line, its CPU time and peak resident set from its rusage.
func importChild(ctx context.Context, exe, url string, files []string, batch, jobs int) (childImport, error) {
	args := []string{"import", "--from", claudecode.Name, "--nats-url", url, "--timeout", "0",
		"--batch", strconv.Itoa(batch), "--jobs", strconv.Itoa(jobs)}
	cmd := exec.CommandContext(ctx, exe, append(args, files...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return childImport{}, err
	}
	// The child's peak resident set is read from its /proc status while
	// it runs (VmHWM only grows; the last reading misses at most the last
	// tick): the rusage of a child forked and exec'd by Go counts the
	// parent's peak too (Linux keeps the larger of the two across exec).
	peak := make(chan float64, 1)
	done := make(chan struct{})
	go func() {
		var hwm float64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := vmHWMMiB(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); v > 0 {
				hwm = v
			}
			select {
			case <-done:
				peak <- hwm
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	run := childImport{peakRSS: <-peak}
	if err != nil {
		return childImport{}, fmt.Errorf("bench import: %s import: %v: %s", exe, err, clipBytes(errOut.Bytes()))
	}
	summary := out.Bytes()[bytes.LastIndex(out.Bytes(), []byte("import: "))+len("import: "):]
	if _, err := fmt.Sscanf(string(summary), "%d files, %d sessions (%d imported, %d unchanged), %d events appended",
		new(int), new(int), new(int), new(int), &run.events); err != nil {
		return childImport{}, fmt.Errorf("bench import: no summary line in the import's output: %v: %q", err, clipBytes(out.Bytes()))
	}
	run.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return run, nil
}

// clipBytes is b's last 500 bytes at most.
func clipBytes(b []byte) []byte { return b[max(0, len(b)-500):] }

// countSink counts events and names the sessions.
type countSink struct {
	n   int
	ids []string
}

func (c *countSink) Session(p agentlog.Plan) error { c.ids = append(c.ids, p.ID); return nil }
func (c *countSink) Event(schema.Envelope) error   { c.n++; return nil }
func (c *countSink) Done() error                   { return nil }

// cpuTime is the CPU time the process has used (user and system): on a
// shared machine the CPU an event costs varies less than the rate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMiB is the process's peak resident set (VmHWM), 0 where /proc
// does not say.
func peakRSSMiB() float64 { return vmHWMMiB("/proc/self/status") }

// vmHWMMiB reads the peak resident set (VmHWM) from a /proc status file,
// 0 where it does not say (the process has exited).
func vmHWMMiB(status string) float64 {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("VmHWM:")); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(v)), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
