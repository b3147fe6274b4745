package ship

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// heldOpen finds a file another process holds open (a child given the
// descriptor), not one only this process holds, and nothing once the
// child is gone; a path reached through a symlink is the same file.
func TestShipHeldOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	rp := realPath(filepath.Join(link, "s.jsonl"))
	want := map[string]bool{rp: true}
	if got := heldOpen("/proc", want, os.Getpid()); got[rp] {
		t.Fatalf("held open by this process only, found: %v", got)
	}
	if got := heldOpen("/proc", want, -1); !got[rp] {
		t.Fatalf("this process holds %s open, not found (real path %s)", path, rp)
	}
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if got := heldOpen("/proc", want, os.Getpid()); !got[rp] {
		t.Errorf("held open by child %d, not found", child.Process.Pid)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if got := heldOpen("/proc", want, os.Getpid()); got[rp] {
		t.Errorf("found held open after its holder exited: %v", got)
	}
}

// One scan of every process's open files, for a path no process holds
// (the whole scan): what a round costs at most once, whatever the number
// of followed files.
func BenchmarkShipHeldOpen(b *testing.B) {
	want := map[string]bool{filepath.Join(b.TempDir(), "none.jsonl"): true}
	for b.Loop() {
		heldOpen("/proc", want, os.Getpid())
	}
}

// A file another process holds open keeps its session's lease past idle
// for several TTLs (while ship notes reads of it at the same time), takes
// it back from another holder that took it and went; once the process
// exits, the lease lapses.
func TestShipLivenessKeepsLeaseWhileOpen(t *testing.T) {
	const ttl = time.Second
	k := writertest.New(t, logstore.Config{LeaseTTL: ttl})
	st, cl := k.St, k.Cl
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const id, holder = "s-live", "h1:claude-code:s.jsonl"
	if _, err := cl.Create(ctx, id, holder, schema.SessionCreated{Agent: "test"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	out := &bytes.Buffer{} // written by run only
	lv := newLiveness(cl, 200*time.Millisecond, out)
	stopped := make(chan struct{})
	go func() { lv.run(ctx); close(stopped) }()
	noting := make(chan struct{})
	go func() {
		defer close(noting)
		for ctx.Err() == nil {
			lv.note(path, holder, info, []string{id})
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		l, _, err := st.GetLease(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil || l.Holder != holder {
			t.Fatalf("lease %+v while the file is held open", l)
		}
	}
	// Another holder takes the lease and goes: ship takes it back once
	// that lease lapses.
	if _, err := cl.TakeOver(ctx, id, "other"); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		l, _, err := st.GetLease(ctx, id)
		if err != nil || l == nil || l.Holder != holder {
			return fmt.Errorf("lease %+v (%v), want it back for %s", l, err, holder)
		}
		return nil
	})
	_ = child.Process.Kill()
	_ = child.Wait()
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		l, _, err := st.GetLease(ctx, id)
		if err != nil || l != nil {
			return fmt.Errorf("lease %+v (%v) after its holder exited", l, err)
		}
		return nil
	})
	cancel()
	<-stopped
	<-noting
	for _, want := range []string{"lease of s-live not renewed", "held open by no process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q not said: %q", want, out.String())
		}
	}
}
