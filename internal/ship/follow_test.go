package ship

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/transcripttest"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
)

// A file whose read no writer answered (none ran yet) is shipped once a
// writer runs, though the file does not change again: its agent may write
// nothing more for an hour.
func TestShipRetriesUnansweredRead(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	st, err := logstore.Open(context.Background(), nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const sid = "5a5a5a5a-0000-4000-8000-0000000000d1"
	dir := filepath.Join(t.TempDir(), "projects")
	if err := os.MkdirAll(filepath.Join(dir, "-w"), 0o755); err != nil {
		t.Fatal(err)
	}
	line := `{"parentUuid":null,"type":"user","sessionId":"` + sid + `","cwd":"/w","message":{"role":"user","content":"build it"},"uuid":"d-1","timestamp":"2026-11-30T10:00:00.000Z"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "-w", sid+".jsonl"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &transcripttest.Output{}
	ctx, cancel := context.WithCancel(context.Background())
	sh := New(ctx, Config{Client: client.New(natstest.Connect(t, s)), Format: claudecode.Format{}, Host: "h", Batch: 500, Idle: IdleDefault, Stdout: out, Stderr: out})
	done := make(chan error, 1)
	go func() { done <- sh.Follow([]string{dir}) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(out.String(), "no writer is listening") {
			return fmt.Errorf("the first read has not failed yet:\n%s", out.String())
		}
		return nil
	})
	writertest.Start(t, st, nc)
	natstest.CheckFor(t, 2*Rescan+10*time.Second, 100*time.Millisecond, func() error {
		evs, _, err := st.ReadEvents(context.Background(), "cc-"+sid, 0)
		if err != nil || len(evs) == 0 {
			return fmt.Errorf("nothing shipped yet (%v):\n%s", err, out.String())
		}
		return nil
	})
}

// ship sends a followed file that shrank and went on to <id>-r2, with a
// warning naming the file, and goes on with -r2 on its next passes.
func TestShipShrunkFileGoesToNextGeneration(t *testing.T) {
	k := writertest.New(t, logstore.Config{})
	var stdout, stderr bytes.Buffer
	sh := New(context.Background(), Config{Client: k.Cl, Format: claudecode.Format{}, Host: "h", Batch: 500, Idle: IdleDefault, Stdout: &stdout, Stderr: &stderr})
	path, id, lines, other := transcripttest.RewriteCase(t)
	if err := sh.Ship(path); err != nil {
		t.Fatal(err)
	}
	transcripttest.WriteLines(t, path, append(append([][]byte{}, lines[:len(lines)-20]...), other[3:12]...), nil)
	if err := sh.Ship(path); err != nil {
		t.Fatal(err)
	}
	r2 := agentlog.GenerationID(id, 2)
	if !strings.Contains(stderr.String(), path) || !strings.Contains(stderr.String(), r2) {
		t.Fatalf("no warning naming %s and %s: %s", path, r2, stderr.String())
	}
	n := len(transcripttest.Stored(t, k.Cl, r2))
	transcripttest.WriteLines(t, path, append(append([][]byte{}, lines[:len(lines)-20]...), other[3:20]...), nil)
	stderr.Reset()
	if err := sh.Ship(path); err != nil {
		t.Fatal(err)
	}
	if got := len(transcripttest.Stored(t, k.Cl, r2)); got <= n || strings.Contains(stderr.String(), "-r3") {
		t.Fatalf("%s went from %d to %d events as the file grew; stderr: %s", r2, n, got, stderr.String())
	}
}
