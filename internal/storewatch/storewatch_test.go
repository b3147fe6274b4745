package storewatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/faultfs"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// The disk under an embedded server fills (every write that grows a file
// fails with ENOSPC) and is freed again: while it is full, Err says the
// store cannot write and why; once space is freed, the watch restarts
// JetStream in the same server, Err is nil again, the stream takes writes,
// and what it acknowledged before is still there.
func TestWatchFullDiskAndBack(t *testing.T) {
	dir := t.TempDir()
	fs, err := faultfs.Mount(filepath.Join(dir, "data"), filepath.Join(dir, "data.disk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fs.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	opts := natstest.Options(filepath.Join(fs.Dir(), "nats"))
	opts.SyncAlways = true
	ns, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })

	w := New(ns, opts, fs.Dir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	publish := func(msg string) error {
		pctx, stop := context.WithTimeout(ctx, 2*time.Second)
		defer stop()
		_, err := js.Publish(pctx, "s.a", []byte(msg))
		return err
	}
	if err := publish("before"); err != nil {
		t.Fatal(err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err before the disk is full: %v", err)
	}

	fs.SetSpace(0)
	if err := publish("while full"); err == nil {
		t.Fatal("a publish while the disk is full was acknowledged")
	}
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		err := w.Err()
		if err == nil || !strings.Contains(err.Error(), "no space left") || !strings.Contains(err.Error(), "the store cannot write") {
			return fmt.Errorf("Err while the disk is full: %v", err)
		}
		return nil
	})

	fs.SetSpace(-1)
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if err := w.Err(); err != nil {
			return fmt.Errorf("Err after space was freed: %w", err)
		}
		return nil
	})
	// JetStream was restarted: a request may find it a moment later.
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error { return publish("after") })
	s, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "before" {
		t.Fatalf("message 1 is %q, want %q", m.Data, "before")
	}
	last, err := s.GetLastMsgForSubject(ctx, "s.a")
	if err != nil {
		t.Fatal(err)
	}
	if string(last.Data) != "after" {
		t.Fatalf("the last message is %q, want %q", last.Data, "after")
	}
}
