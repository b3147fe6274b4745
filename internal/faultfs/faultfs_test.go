package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mountT mounts a fault filesystem in a temporary directory; it is
// unmounted when the test ends.
func mountT(t *testing.T) *FS {
	t.Helper()
	dir := t.TempDir()
	f, err := Mount(filepath.Join(dir, "mnt"), filepath.Join(dir, "backing"))
	if err != nil {
		t.Fatalf("mount (needs root and /dev/fuse): %v", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func openT(t *testing.T, f *FS, name string, flags int) *os.File {
	t.Helper()
	fh, err := os.OpenFile(filepath.Join(f.Dir(), name), flags, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return fh
}

// syncedT creates name holding content, synced.
func syncedT(t *testing.T, f *FS, name, content string) {
	t.Helper()
	fh := openT(t, f, name, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
	writeT(t, fh, content)
	syncT(t, fh)
	fh.Close()
}

func writeT(t *testing.T, fh *os.File, s string) {
	t.Helper()
	if _, err := fh.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func syncT(t *testing.T, fh *os.File) {
	t.Helper()
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
}

func lossT(t *testing.T, f *FS) LossStats {
	t.Helper()
	ls, err := f.PowerLoss()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// wantFile checks the file's content through the mount, and that the
// backing file agrees.
func wantFile(t *testing.T, f *FS, name, want string) {
	t.Helper()
	for _, dir := range []string{f.Dir(), f.Backing()} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if string(b) != want {
			t.Fatalf("%s/%s = %q, want %q", dir, name, b, want)
		}
	}
}

func wantGone(t *testing.T, f *FS, name string) {
	t.Helper()
	for _, dir := range []string{f.Dir(), f.Backing()} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s/%s: want gone, stat says %v", dir, name, err)
		}
	}
}

// Write, fsync, write, power loss: the file holds what was synced.
func TestPowerLossDropsUnsyncedAppends(t *testing.T) {
	f := mountT(t)
	fh := openT(t, f, "a.blk", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "synced-")
	syncT(t, fh)
	writeT(t, fh, "lost-1 ")
	writeT(t, fh, "lost-2")
	fh.Close()
	if files, created := f.Unsynced(); files != 1 || created != 0 {
		t.Fatalf("unsynced %d files (%d created), want 1 (0)", files, created)
	}
	ls := lossT(t, f)
	if ls.Reverted != 1 || ls.Removed != 0 || ls.Bytes != int64(len("lost-1 lost-2")) {
		t.Fatalf("loss %s", ls)
	}
	wantFile(t, f, "a.blk", "synced-")
	// Writing goes on from the synced state.
	fh = openT(t, f, "a.blk", os.O_RDWR|os.O_APPEND)
	writeT(t, fh, "again")
	syncT(t, fh)
	fh.Close()
	lossT(t, f)
	wantFile(t, f, "a.blk", "synced-again")
}

// Overwrites and truncations since the last sync are undone, in reverse
// order, whatever they did to each other.
func TestPowerLossRestoresOverwritesAndTruncations(t *testing.T) {
	f := mountT(t)
	fh := openT(t, f, "idx", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "0123456789")
	syncT(t, fh)
	if _, err := fh.WriteAt([]byte("AB"), 3); err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(6); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("xyzxyz"), 4); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(f.Dir(), "idx"), 2); err != nil { // by path
		t.Fatal(err)
	}
	fh.Close()
	lossT(t, f)
	wantFile(t, f, "idx", "0123456789")

	// A truncation that was synced stays.
	fh = openT(t, f, "idx", os.O_RDWR)
	if err := fh.Truncate(4); err != nil {
		t.Fatal(err)
	}
	syncT(t, fh)
	writeT(t, fh, "zz")
	fh.Close()
	lossT(t, f)
	wantFile(t, f, "idx", "0123")

	// open(O_TRUNC) is a truncation too.
	fh = openT(t, f, "idx", os.O_RDWR|os.O_TRUNC)
	writeT(t, fh, "new")
	fh.Close()
	lossT(t, f)
	wantFile(t, f, "idx", "0123")
}

// A file created and never synced is gone after a power loss, with its
// entry; one synced (by fsync or by O_SYNC writes) stays; so does a
// directory.
func TestPowerLossCreatedFiles(t *testing.T) {
	f := mountT(t)
	if err := os.MkdirAll(filepath.Join(f.Dir(), "msgs"), 0o755); err != nil {
		t.Fatal(err)
	}
	fh := openT(t, f, "msgs/2.blk", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "never synced")
	fh.Close()
	syncedT(t, f, "msgs/1.blk", "synced")
	fh = openT(t, f, "msgs/3.blk", os.O_CREATE|os.O_RDWR|os.O_SYNC)
	writeT(t, fh, "osync")
	fh.Close()
	fh = openT(t, f, "msgs/empty", os.O_CREATE|os.O_RDWR)
	fh.Close()
	if files, created := f.Unsynced(); files != 2 || created != 2 {
		t.Fatalf("unsynced %d files (%d created), want 2 (2)", files, created)
	}
	ls := lossT(t, f)
	if ls.Removed != 2 {
		t.Fatalf("loss %s, want 2 removed", ls)
	}
	wantGone(t, f, "msgs/2.blk")
	wantGone(t, f, "msgs/empty")
	wantFile(t, f, "msgs/1.blk", "synced")
	wantFile(t, f, "msgs/3.blk", "osync")
}

// A directory's fsync makes the entries of files created in it durable,
// not their data: a marker file (its name is the data) survives, so does
// an unsynced file's entry, empty.
func TestPowerLossDirectorySync(t *testing.T) {
	f := mountT(t)
	openT(t, f, "marker.000001", os.O_CREATE|os.O_RDWR).Close()
	fh := openT(t, f, "000004.log", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "unsynced")
	fh.Close()
	d, err := os.Open(f.Dir())
	if err != nil {
		t.Fatal(err)
	}
	syncT(t, d)
	d.Close()
	fh = openT(t, f, "after", os.O_CREATE|os.O_RDWR)
	fh.Close()
	lossT(t, f)
	wantFile(t, f, "marker.000001", "")
	wantFile(t, f, "000004.log", "")
	wantGone(t, f, "after")
}

// Renames are durable at once and carry a file's record with it: the
// atomic write of an index (write a temporary file, sync it, rename it
// over the old one) survives; an unsynced write after the rename does not.
func TestPowerLossRename(t *testing.T) {
	f := mountT(t)
	syncedT(t, f, "index.db", "old")
	fh := openT(t, f, "index.db.tmp", os.O_CREATE|os.O_RDWR|os.O_TRUNC)
	writeT(t, fh, "new")
	syncT(t, fh)
	writeT(t, fh, "+unsynced")
	fh.Close()
	if err := os.Rename(filepath.Join(f.Dir(), "index.db.tmp"), filepath.Join(f.Dir(), "index.db")); err != nil {
		t.Fatal(err)
	}
	lossT(t, f)
	wantFile(t, f, "index.db", "new")
	wantGone(t, f, "index.db.tmp")

	// A created, never synced file renamed into place is lost with its
	// new name.
	fh = openT(t, f, "meta.tmp", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "meta")
	fh.Close()
	if err := os.Rename(filepath.Join(f.Dir(), "meta.tmp"), filepath.Join(f.Dir(), "meta.inf")); err != nil {
		t.Fatal(err)
	}
	lossT(t, f)
	wantGone(t, f, "meta.inf")

	// A removed file's record goes with it: a new file that may reuse
	// its inode is not reverted by it.
	fh = openT(t, f, "gone", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "x")
	fh.Close()
	if err := os.Remove(filepath.Join(f.Dir(), "gone")); err != nil {
		t.Fatal(err)
	}
	if files, _ := f.Unsynced(); files != 0 {
		t.Fatalf("%d files unsynced after the only one was removed", files)
	}
}

// A handle opened before a power loss belongs to a dead process: it can
// no longer write.
func TestPowerLossKillsOldHandles(t *testing.T) {
	f := mountT(t)
	fh := openT(t, f, "a", os.O_CREATE|os.O_RDWR)
	writeT(t, fh, "x")
	syncT(t, fh)
	lossT(t, f)
	if _, err := fh.Write([]byte("late")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write on a handle from before the power loss: %v, want EIO", err)
	}
	fh.Close()
	wantFile(t, f, "a", "x")
}

// Past its byte budget the disk is full: a write that would grow a file
// fails with ENOSPC and changes nothing; overwrites still work; lifting
// the budget frees it.
func TestDiskFull(t *testing.T) {
	f := mountT(t)
	fh := openT(t, f, "a", os.O_CREATE|os.O_RDWR)
	defer fh.Close()
	f.SetSpace(10)
	writeT(t, fh, "12345678")
	if _, err := fh.Write([]byte("9abc")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the budget: %v, want ENOSPC", err)
	}
	if _, err := fh.WriteAt([]byte("AB"), 0); err != nil {
		t.Fatalf("overwrite within the file on a full disk: %v", err)
	}
	syncT(t, fh)
	wantFile(t, f, "a", "AB345678")
	f.SetSpace(-1)
	writeT(t, fh, "9abc")
	wantFile(t, f, "a", "AB3456789abc")
}

// FlipBit and TruncateTail change the file durably.
func TestCorruption(t *testing.T) {
	f := mountT(t)
	syncedT(t, f, "1.blk", "abcdefgh")
	if err := f.FlipBit("1.blk", 2, 0); err != nil {
		t.Fatal(err)
	}
	size, err := f.TruncateTail("1.blk", 3)
	if err != nil || size != 5 {
		t.Fatalf("truncate tail: %d, %v", size, err)
	}
	lossT(t, f)
	// 'c' (0x63) with its lowest bit flipped is 'b' (0x62).
	wantFile(t, f, "1.blk", "abbde")
}
