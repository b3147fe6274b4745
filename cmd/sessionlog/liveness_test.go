package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
