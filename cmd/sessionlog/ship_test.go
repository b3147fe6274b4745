package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/ship"
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
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runShip(ctx, []string{"--from", "claude-code", "--nats-url", s.ClientURL(), dir}, out, out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(out.String(), "no writer is listening") {
			return fmt.Errorf("the first read has not failed yet:\n%s", out.String())
		}
		return nil
	})
	startWriter(t, st, nc)
	natstest.CheckFor(t, 2*ship.Rescan+10*time.Second, 100*time.Millisecond, func() error {
		evs, _, err := st.ReadEvents(context.Background(), "cc-"+sid, 0)
		if err != nil || len(evs) == 0 {
			return fmt.Errorf("nothing shipped yet (%v):\n%s", err, out.String())
		}
		return nil
	})
}
