// Package faultfs is a FUSE loopback filesystem for tests that break the
// disk under a process: it mounts a backing directory at a mount point,
// passes every operation through, and remembers what was written since
// each file was last fsynced, so that a power loss can be simulated by
// dropping exactly that. It can also flip a bit in a file, cut a file's
// tail, and answer ENOSPC once a byte budget is spent (a full disk).
//
// The durability model is that of a journaling filesystem in ordered mode
// (ext4 without delayed allocation surprises):
//
//   - a file's data is durable up to its last fsync (or fdatasync); a
//     write through a descriptor opened with O_SYNC or O_DSYNC is durable
//     when it returns;
//   - a file created and never synced is lost with its directory entry,
//     unless its directory was fsynced since: then the entry stays, with
//     the file's data as of its last sync (empty if never);
//   - renames, unlinks and directory creation are durable at once (the
//     journal commits metadata in order).
//
// A power loss (PowerLoss) reverts every file to that state: each file
// keeps an undo log of the writes and truncations since its last sync
// (for an append, just the size before it; for an overwrite, the bytes it
// replaced), applied in reverse order. The caller must have stopped every
// process using the mount first (SIGKILL and reaped); an operation of a
// handle opened before the power loss fails with EIO, so a request the
// dead process left in flight cannot land after it.
//
// Mounting needs root (or CAP_SYS_ADMIN) and /dev/fuse: it uses the
// mount(2) syscall directly (DirectMount), no fusermount binary.
package faultfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mounted fault filesystem.
type FS struct {
	backing, mnt string

	// mu: file operations hold it shared, PowerLoss exclusively.
	mu sync.RWMutex
	// files holds the unsynced state of each backing inode that has any;
	// filesMu guards the map itself (file operations add to it while
	// holding mu shared).
	files   map[uint64]*fileState
	filesMu sync.Mutex
	// gen counts power losses; a handle of an older one is dead.
	gen atomic.Uint64
	// space is how many more bytes files may grow by; < 0: unlimited.
	space atomic.Int64

	server *fuse.Server
}

// fileState is what a file has had done to it since its last sync.
type fileState struct {
	mu sync.Mutex
	// created: the file was created since the last sync of it: a power
	// loss removes it.
	created bool
	undo    []undo
}

// undo restores what one write or truncation changed: old is written
// back at off, then the file is cut to size.
type undo struct {
	off  int64
	old  []byte
	size int64
}

// Mount mounts a fault filesystem over backing at mnt (both directories,
// created if missing).
func Mount(mnt, backing string) (*FS, error) {
	for _, d := range []string{mnt, backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	f := &FS{backing: backing, mnt: mnt, files: map[uint64]*fileState{}}
	f.space.Store(-1)
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return err
	}
	root := &gofs.LoopbackRoot{Path: f.backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, fs: f}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	// No kernel caching of entries or attributes: after a power loss the
	// backing files change under the kernel's feet. File pages are
	// dropped on every open (no FOPEN_KEEP_CACHE).
	var zero time.Duration
	srv, err := gofs.Mount(f.mnt, root.RootNode, &gofs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true, FsName: "faultfs:" + f.backing, Name: "faultfs",
			AllowOther: true, DisableXAttrs: true,
		},
	})
	if err != nil {
		return fmt.Errorf("faultfs: mount %s: %w", f.mnt, err)
	}
	f.server = srv
	return nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.mnt }

// Backing is the backing directory.
func (f *FS) Backing() string { return f.backing }

// Unmount unmounts the filesystem, retrying while the mount is busy (a
// killed process's files are released asynchronously).
func (f *FS) Unmount() error {
	if f.server == nil {
		return nil
	}
	var err error
	for i := 0; i < 100; i++ {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			f.server = nil
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("faultfs: unmount %s: %w", f.mnt, err)
}

// SetSpace lets files grow by n more bytes in all before writes fail with
// ENOSPC; n < 0 lifts the limit.
func (f *FS) SetSpace(n int64) { f.space.Store(n) }

// charge takes n bytes of space; false if there is not enough.
func (f *FS) charge(n int64) bool {
	if n <= 0 {
		return true
	}
	for {
		s := f.space.Load()
		if s < 0 {
			return true
		}
		if s < n {
			return false
		}
		if f.space.CompareAndSwap(s, s-n) {
			return true
		}
	}
}

// Unsynced reports how many files have writes not yet synced, and how
// many of those were created since.
func (f *FS) Unsynced() (files, created int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.filesMu.Lock()
	defer f.filesMu.Unlock()
	for _, s := range f.files {
		s.mu.Lock()
		if s.created || len(s.undo) > 0 {
			files++
		}
		if s.created {
			created++
		}
		s.mu.Unlock()
	}
	return files, created
}

// LossStats is what a power loss dropped.
type LossStats struct {
	// Reverted files (cut back or restored), Removed files (created and
	// never synced), Bytes of data dropped (size lost plus bytes restored).
	Reverted, Removed int
	Bytes             int64
	// Paths are the files reverted or removed, relative to the mount,
	// with what happened to each ("path: removed 123 bytes").
	Paths []string
}

func (s LossStats) String() string {
	return fmt.Sprintf("reverted=%d removed=%d bytes=%d", s.Reverted, s.Removed, s.Bytes)
}

// PowerLoss drops every write not yet synced: each file goes back to its
// content at its last sync, files created and never synced disappear.
// Every process using the mount must be dead already. Handles opened
// before it fail from now on.
func (f *FS) PowerLoss() (LossStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen.Add(1)
	var ls LossStats
	err := filepath.WalkDir(f.backing, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		s := f.files[st.Ino]
		if s == nil {
			return nil
		}
		rel, _ := filepath.Rel(f.backing, p)
		if s.created {
			ls.Removed++
			ls.Bytes += st.Size
			ls.Paths = append(ls.Paths, fmt.Sprintf("%s: removed %d bytes", rel, st.Size))
			return os.Remove(p)
		}
		if len(s.undo) == 0 {
			return nil
		}
		ls.Reverted++
		b, err := revert(p, s.undo)
		ls.Bytes += b
		ls.Paths = append(ls.Paths, fmt.Sprintf("%s: reverted %d bytes", rel, b))
		return err
	})
	f.files = map[uint64]*fileState{}
	return ls, err
}

// revert applies an undo log in reverse; it returns the bytes dropped.
func revert(p string, log []undo) (int64, error) {
	fh, st, err := openRW(p)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	var dropped int64
	for i := len(log) - 1; i >= 0; i-- {
		u := log[i]
		if len(u.old) > 0 {
			if _, err := fh.WriteAt(u.old, u.off); err != nil {
				return dropped, err
			}
			dropped += int64(len(u.old))
		}
		if err := fh.Truncate(u.size); err != nil {
			return dropped, err
		}
	}
	if d := st.Size() - log[0].size; d > 0 {
		dropped += d
	}
	return dropped, nil
}

// state returns the record of inode ino, creating it.
func (f *FS) state(ino uint64) *fileState {
	f.filesMu.Lock()
	defer f.filesMu.Unlock()
	s := f.files[ino]
	if s == nil {
		s = &fileState{}
		f.files[ino] = s
	}
	return s
}

// forget drops the record of an inode that no longer exists.
func (f *FS) forget(ino uint64) {
	f.filesMu.Lock()
	delete(f.files, ino)
	f.filesMu.Unlock()
}

// record saves what changing [off, off+n) of the file behind fd to a
// final size of newSize will destroy, and charges its growth.
func (f *FS) record(fd int, s *fileState, off, n, newSize int64) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	size := st.Size
	if newSize > size && !f.charge(newSize-size) {
		return syscall.ENOSPC
	}
	u := undo{off: off, size: size}
	if end := min(off+n, size); end > off {
		u.old = make([]byte, end-off)
		if _, err := syscall.Pread(fd, u.old, off); err != nil {
			return gofs.ToErrno(err)
		}
	}
	// Appends in a row need only the size before the first of them.
	if k := len(s.undo); k > 0 && len(u.old) == 0 && len(s.undo[k-1].old) == 0 && s.undo[k-1].size <= size {
		return 0
	}
	s.undo = append(s.undo, u)
	return 0
}

// synced forgets what the file had unsynced: it is durable now.
func (s *fileState) synced() {
	s.created = false
	s.undo = nil
}

// FlipBit flips bit (0-7) of the byte at off in the file at rel (a path
// under the mount), durably: a corruption the disk returns from now on.
func (f *FS) FlipBit(rel string, off int64, bit uint) error {
	fh, err := os.OpenFile(filepath.Join(f.mnt, rel), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, off); err != nil {
		return fmt.Errorf("faultfs: flip %s at %d: %w", rel, off, err)
	}
	b[0] ^= 1 << (bit % 8)
	if _, err := fh.WriteAt(b, off); err != nil {
		return err
	}
	return fh.Sync()
}

// TruncateTail cuts n bytes off the end of the file at rel (a path under
// the mount), durably; it returns the new size.
func (f *FS) TruncateTail(rel string, n int64) (int64, error) {
	fh, st, err := openRW(filepath.Join(f.mnt, rel))
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	size := max(st.Size()-n, 0)
	if err := fh.Truncate(size); err != nil {
		return 0, err
	}
	return size, fh.Sync()
}

// openRW opens p for reading and writing, with its size.
func openRW(p string) (*os.File, os.FileInfo, error) {
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	return fh, st, nil
}
