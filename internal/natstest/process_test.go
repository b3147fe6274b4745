package natstest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunProcess starts nats-server in a process of its own, storing in the
// directory it is given, and stops that process when the test ends.
func TestRunProcess(t *testing.T) {
	dir := t.TempDir()
	var pid int
	t.Run("serve", func(t *testing.T) {
		p := RunProcess(t, dir)
		pid = p.Pid
		if pid == os.Getpid() {
			t.Fatalf("the server runs in this process (%d)", pid)
		}
		nc, err := nats.Connect(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js := JetStream(t, nc)
		ctx := context.Background()
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "p.1", []byte("x")); err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil || info.State.Msgs != 1 {
			t.Fatalf("stream P: %+v, %v", info, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "jetstream", "$G", "streams", "P")); err != nil {
			t.Fatalf("the stream is not stored in the directory given: %v", err)
		}
	})
	if pid == 0 {
		return // the server did not start: serve failed
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the server's process %d is still there after its test: %v", pid, err)
	}
}
