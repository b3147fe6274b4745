package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog bench import [--quick]`: a generated directory of Claude
// Code session files imported into an embedded server through the writer,
// against the raw floor of reading and decoding the same files (no
// appends, decode_floor) and against the raw store floor (baseline): the
// very messages the import stored, published again straight to
// JetStream in atomic batches of --batch, --jobs at once (see
// bench.ImportFloor), in one run.
func runBenchImport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench import")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "100 files of about 100 KB (under a minute)")
	files := fs.Int("files", 1000, "session files to generate")
	turns := fs.Int("turns", 40, "turns per file (about 2.5 KB each)")
	batch := fs.Int("batch", 500, "events per append")
	jobs := fs.Int("jobs", 4, "appends in flight at once (import's default), and sessions at once in the floor")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the import to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *quick {
		*files = 100
	}
	dir, cleanup, err := natstest.TempDir("sessionlog-bench-import-")
	if err != nil {
		return err
	}
	defer cleanup()
	src := filepath.Join(dir, "projects")
	bytesTotal, err := genSessions(src, *files, *turns)
	if err != nil {
		return err
	}
	paths, err := sessionFiles(claudecode.Format{}, []string{src})
	if err != nil {
		return err
	}

	// Floor 1: read and map every file, appending nothing.
	start := time.Now()
	var events int
	for _, p := range paths {
		var c countSink
		if _, err := agentlog.ReadFile(claudecode.Format{}, p, agentlog.Options{}, &c); err != nil {
			return err
		}
		events += c.n
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
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	defer func() { stop(); <-werr }()
	for w.Ready() != nil {
		select {
		case err := <-werr:
			return fmt.Errorf("writer: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()

	// The import, as `import --from claude-code` runs it.
	cl := client.New(nc)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	start, cpu0 := time.Now(), cpuTime()
	n, err := importFiles(ctx, cl, claudecode.Format{}, paths, importOptions{batch: *batch, jobs: *jobs})
	if err != nil {
		return err
	}
	took, importCPU := time.Since(start), cpuTime()-cpu0
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	appended := n.events
	if appended != events {
		return fmt.Errorf("bench import: %d events appended, the mapping gives %d", appended, events)
	}
	rate := float64(appended) / took.Seconds()
	importRSS := peakRSSMiB()

	// Floor 2: the bytes the import stored, published again in raw
	// atomic batches of the same size, as many at once as the import
	// keeps appends in flight.
	sessions, err := spoolSessions(ctx, st, filepath.Join(dir, "spool"))
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
	cpu0 = cpuTime()
	floor, err := bench.ImportFloor(ctx, fnc, sessions, *batch, *jobs)
	if err != nil {
		return err
	}
	floorCPU := cpuTime() - cpu0
	fmt.Fprintf(stdout, "BENCH name=import value=%.0f unit=ev/s baseline=%.0f ratio=%.2f mb_per_s=%.1f decode_floor=%.0f peak_rss_mib=%.0f decode_peak_rss_mib=%.0f files=%d mb=%.1f events=%d jobs=%d batch=%d cpu_us_per_ev=%.1f floor_cpu_us_per_ev=%.1f\n",
		rate, floor, rate/floor, float64(bytesTotal)/(1<<20)/took.Seconds(), decode, importRSS, decodeRSS, len(paths), float64(bytesTotal)/(1<<20), events, *jobs, *batch,
		float64(importCPU.Microseconds())/float64(events), float64(floorCPU.Microseconds())/float64(events))
	return nil
}

// spoolSessions copies every stored session's messages to a spool file in
// dir, for the raw floor to publish again under an id of the same length
// ("floor-" in place of the id's first six characters: the bench's ids
// differ after them).
func spoolSessions(ctx context.Context, st *logstore.Store, dir string) ([]bench.FloorSession, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	refs, err := st.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]bench.FloorSession, 0, len(refs))
	for i, r := range refs {
		if len(r.ID) <= 6 {
			return nil, fmt.Errorf("bench import: session id %q too short to rename", r.ID)
		}
		id := "floor-" + r.ID[6:]
		loc, err := st.Locate(id)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, strconv.Itoa(i))
		sp, err := bench.CreateSpool(path)
		if err != nil {
			return nil, err
		}
		_, err = st.ReadSession(ctx, r.ID, 0, sp.Add)
		n, cerr := sp.Close()
		if err = errors.Join(err, cerr); err != nil {
			return nil, fmt.Errorf("bench import: spool %s: %w", r.ID, err)
		}
		out = append(out, bench.FloorSession{ID: id, Subject: loc.Subject, Spool: path, Events: n})
	}
	return out, nil
}

// countSink counts events.
type countSink struct{ n int }

func (c *countSink) Session(agentlog.Plan) error { return nil }
func (c *countSink) Event(schema.Envelope) error { c.n++; return nil }
func (c *countSink) Done() error                 { return nil }

// genSessions writes n Claude Code session files of turns turns each: a
// prompt, a tool call, its 1.5 KB result and a reply per turn.
func genSessions(dir string, n, turns int) (int64, error) {
	if err := os.MkdirAll(filepath.Join(dir, "-bench"), 0o755); err != nil {
		return 0, err
	}
	output := strings.Repeat("result line of a typical tool output\n", 40)
	var total int64
	for i := 0; i < n; i++ {
		sid := fmt.Sprintf("bbbbbbbb-bbbb-4bbb-8bbb-%012d", i)
		f, err := os.Create(filepath.Join(dir, "-bench", sid+".jsonl"))
		if err != nil {
			return 0, err
		}
		bw := bufio.NewWriter(f)
		parent := ""
		k := 0
		put := func(typ string, msg any, extra map[string]any) {
			k++
			uuid := fmt.Sprintf("%s-%06d", sid[:8], k)
			l := map[string]any{"parentUuid": nullable(parent), "isSidechain": false, "userType": "external", "cwd": "/bench",
				"sessionId": sid, "version": "2.1.3", "gitBranch": "main", "type": typ, "message": msg, "uuid": uuid,
				"timestamp": "2026-11-30T10:00:00.000Z"}
			for key, v := range extra {
				l[key] = v
			}
			b, _ := json.Marshal(l)
			bw.Write(b)
			bw.WriteByte('\n')
			parent = uuid
		}
		for t := 0; t < turns; t++ {
			call := "toolu_" + strconv.Itoa(t)
			put("user", map[string]any{"role": "user", "content": fmt.Sprintf("step %d: run the tests", t)}, nil)
			put("assistant", map[string]any{"id": "msg_a" + strconv.Itoa(t), "type": "message", "role": "assistant", "model": "m",
				"content":     []any{map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]string{"command": "go test ./..."}}},
				"stop_reason": "tool_use", "usage": map[string]int{"input_tokens": 100, "output_tokens": 20}}, nil)
			put("user", map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": output}}}, nil)
			put("assistant", map[string]any{"id": "msg_b" + strconv.Itoa(t), "type": "message", "role": "assistant", "model": "m",
				"content": []any{map[string]any{"type": "text", "text": "All tests pass."}}, "stop_reason": "end_turn"}, nil)
		}
		if err := bw.Flush(); err != nil {
			return 0, err
		}
		info, err := f.Stat()
		if err == nil {
			total += info.Size()
		}
		if err := f.Close(); err != nil {
			return 0, err
		}
	}
	return total, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

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
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
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
