package projector_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// The test binary doubles as the projector process the kill test
// SIGKILLs: with PROJECTOR_CHILD set, TestMain runs a projector instead of
// the tests.
func TestMain(m *testing.M) {
	if os.Getenv("PROJECTOR_CHILD") != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 1 }
	nc, err := nats.Connect(os.Getenv("PROJECTOR_NATS_URL"))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	ls, err := logstore.Open(ctx, nc, logstore.Config{NoProvision: true})
	if err != nil {
		return fail(err)
	}
	batch, _ := strconv.Atoi(os.Getenv("PROJECTOR_BATCH"))
	snap, _ := strconv.Atoi(os.Getenv("PROJECTOR_SNAPSHOT_EVERY"))
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
		out.Flush()
	}
	s, err := projector.New(projector.Config{
		Store: ls, DataDir: os.Getenv("PROJECTOR_DIR"), MaxBatchEvents: batch, SnapshotEvery: snap,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnCommit: func(cp store.Checkpoint) { say("cp %d\n", consumed(cp)) },
	})
	if err != nil {
		return fail(err)
	}
	m := s.Mode()
	say("mode rebuild=%v reason=%q\n", m.Rebuild, m.Reason)
	go func() {
		for s.Ready() != nil {
			time.Sleep(5 * time.Millisecond)
		}
		say("ready\n")
	}()
	// SIGTERM is a clean stop (the store syncs its log); SIGKILL is the
	// crash under test.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	if err := s.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// consumed is how many events a checkpoint's positions cover: the sum of
// its streams' positions, each stream filled from seq 1.
func consumed(cp store.Checkpoint) uint64 {
	var n uint64
	for _, p := range cp.Streams {
		n += p.Seq
	}
	return n
}

// TestSIGKILLDuringCatchUpConverges kills a projector process with SIGKILL
// at 20 random points while it catches up on a large stream (or on three
// partitions, one position each in its checkpoint), restarts it each time,
// and checks that the views it ends with equal a clean rebuild and that
// every restart resumed from its checkpoint (no rebuild hid a broken
// store).
func TestSIGKILLDuringCatchUpConverges(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprintf("P%d", partitions), func(t *testing.T) { testSIGKILLDuringCatchUp(t, partitions) })
	}
}

func testSIGKILLDuringCatchUp(t *testing.T, partitions int) {
	e := projectortest.NewEnvPartitions(t, partitions)
	// 50k events keep it at ~1 min on 2 cores; the race detector slows
	// the child several times, so it gets a smaller stream.
	total, sessions := 50_000, 400
	if testing.Short() || raceEnabled {
		total, sessions = 8_000, 120
	}
	fleet := gen.NewFleet("k", sessions, 7, projectortest.T0)
	if _, err := fleet.Fill(e.Ctx, e.LS, total); err != nil {
		t.Fatal(err)
	}
	// Kill points and the end count events over every stream.
	last := uint64(total)
	dir := filepath.Join(t.TempDir(), "views")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, stream ends at %d", seed, last)
	rnd := rand.New(rand.NewPCG(seed, 1))
	// Each kill lands on the first commit at or after its target, and a
	// commit can cover hundreds of events: so each target is drawn after
	// the checkpoint the previous kill left, in a share of what is left of
	// the stream, keeping room for the kills still to come.
	const kills = 20
	nextTarget := func(done uint64, remaining int) uint64 {
		if done+1 >= last {
			return last
		}
		span := (last - done) / uint64(remaining+1)
		if span < 1 {
			span = 1
		}
		return done + 1 + rnd.Uint64N(span)
	}

	run := func(killAt uint64) (mode string, reached uint64) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PROJECTOR_CHILD=1", "PROJECTOR_NATS_URL="+e.Srv.ClientURL(), "PROJECTOR_DIR="+dir, "PROJECTOR_BATCH=300", "PROJECTOR_SNAPSHOT_EVERY=16")
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		timer := time.AfterFunc(120*time.Second, func() { cmd.Process.Kill() })
		defer timer.Stop()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "mode "):
				mode = line
			case strings.HasPrefix(line, "cp "):
				reached, _ = strconv.ParseUint(line[3:], 10, 64)
				if killAt > 0 && reached >= killAt {
					cmd.Process.Signal(syscall.SIGKILL)
					return mode, reached
				}
			case line == "ready" && killAt == 0:
				// The last run stops cleanly, so its final commits are
				// synced and the store can be compared at the stream's end.
				cmd.Process.Signal(syscall.SIGTERM)
				return mode, reached
			case line == "ready":
				// Caught up before the kill point (earlier kills landed
				// late): crash it here, caught up, which is a crash point too.
				cmd.Process.Signal(syscall.SIGKILL)
				return mode, reached
			}
		}
		t.Fatalf("child ended before the kill point %d (reached %d, mode %s)", killAt, reached, mode)
		return
	}
	var done uint64
	for i := range kills {
		at := nextTarget(done, kills-i)
		mode, reached := run(at)
		done = max(done, reached)
		// A kill before the first batch reached the log leaves an empty
		// store, which starts from scratch; anything else must resume.
		if i > 0 && !strings.Contains(mode, "rebuild=false") && !strings.Contains(mode, `reason="empty"`) {
			t.Fatalf("restart %d did not resume: %s", i, mode)
		}
		t.Logf("kill %d at checkpoint %d (target %d)", i+1, reached, at)
	}
	mode, _ := run(0)
	if !strings.Contains(mode, "rebuild=false") {
		t.Fatalf("final restart did not resume: %s", mode)
	}

	db, cp := projectortest.OpenCheckpoint(t, dir)
	scan, keys, err := db.Scan()
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := consumed(cp); got < last || len(cp.Streams) != partitions {
		t.Fatalf("final checkpoint covers %d events in %d streams, the log holds %d in %d", got, len(cp.Streams), last, partitions)
	}
	rebuilt, err := projector.Rebuild(e.Ctx, e.LS, filepath.Join(t.TempDir(), "clean"), cp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Checksum != scan || scan != rebuilt {
		t.Fatalf("after 20 SIGKILLs: checkpoint %016x scan %016x clean rebuild %016x", cp.Checksum, scan, rebuilt)
	}
	t.Logf("%d view keys, checksum %016x", keys, scan)
}
