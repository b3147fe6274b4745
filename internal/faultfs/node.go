package faultfs

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node whose files record what they have unsynced.
type node struct {
	gofs.LoopbackNode
	fs *FS
}

var (
	_ gofs.NodeOpener         = (*node)(nil)
	_ gofs.NodeCreater        = (*node)(nil)
	_ gofs.NodeSetattrer      = (*node)(nil)
	_ gofs.NodeUnlinker       = (*node)(nil)
	_ gofs.NodeRenamer        = (*node)(nil)
	_ gofs.NodeCopyFileRanger = (*node)(nil)
	_ gofs.NodeOpendirHandler = (*node)(nil)
)

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.fs.backing, n.Path(nil))
}

const syncFlags = syscall.O_SYNC | syscall.O_DSYNC

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	// O_TRUNC is a truncation to record: open without it, then cut.
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.fs.wrap(fh, flags&syncFlags != 0)
	if errno != 0 {
		return nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if errno := h.truncate(0); errno != 0 {
			h.lf.Release(ctx)
			return nil, 0, errno
		}
	}
	return h, ff, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	n.fs.mu.RLock()
	defer n.fs.mu.RUnlock()
	ch, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.fs.wrap(fh, flags&syncFlags != 0)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	s := n.fs.state(h.ino)
	s.mu.Lock()
	s.created = true
	s.mu.Unlock()
	return ch, h, ff, 0
}

// Setattr records a truncation by path (a truncation through a handle
// goes to the handle's Setattr).
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && f == nil {
		n.fs.mu.RLock()
		fh, err := os.OpenFile(n.backingPath(), os.O_RDWR, 0)
		if err != nil {
			n.fs.mu.RUnlock()
			return gofs.ToErrno(err)
		}
		var st syscall.Stat_t
		errno := gofs.ToErrno(syscall.Fstat(int(fh.Fd()), &st))
		if errno == 0 {
			s := n.fs.state(st.Ino)
			s.mu.Lock()
			errno = n.fs.record(int(fh.Fd()), s, int64(sz), math.MaxInt64-int64(sz), int64(sz))
			if errno == 0 {
				errno = gofs.ToErrno(fh.Truncate(int64(sz)))
			}
			s.mu.Unlock()
		}
		fh.Close()
		n.fs.mu.RUnlock()
		if errno != 0 {
			return errno
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// inoOf is the backing inode of path, 0 if there is none.
func inoOf(path string) (uint64, uint64) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, 0
	}
	return st.Ino, uint64(st.Nlink)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.fs.mu.RLock()
	defer n.fs.mu.RUnlock()
	ino, links := inoOf(filepath.Join(n.backingPath(), name))
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 && ino != 0 && links <= 1 {
		n.fs.forget(ino)
	}
	return errno
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	n.fs.mu.RLock()
	defer n.fs.mu.RUnlock()
	// A rename over a file ends that file.
	ino, links := inoOf(filepath.Join(n.fs.backing, newParent.EmbeddedInode().Path(nil), newName))
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 && ino != 0 && links <= 1 && flags == 0 {
		n.fs.forget(ino)
	}
	return errno
}

// OpendirHandle wraps the directory's handle so that its fsync is seen.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{ds: fh, n: n}, ff, 0
}

// dirHandle is an open directory.
type dirHandle struct {
	ds gofs.FileHandle
	n  *node
}

var (
	_ gofs.FileReaddirenter = (*dirHandle)(nil)
	_ gofs.FileSeekdirer    = (*dirHandle)(nil)
	_ gofs.FileReleasedirer = (*dirHandle)(nil)
	_ gofs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.ds.(gofs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.ds.(gofs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.ds.(gofs.FileReleasedirer).Releasedir(ctx, flags)
}

// Fsyncdir makes the directory's entries durable: a file created in it
// stays after a power loss (with what of its data was synced).
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	d.n.fs.mu.RLock()
	defer d.n.fs.mu.RUnlock()
	dir := d.n.backingPath()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return gofs.ToErrno(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if ino, _ := inoOf(filepath.Join(dir, e.Name())); ino != 0 {
			s := d.n.fs.state(ino)
			s.mu.Lock()
			s.created = false
			s.mu.Unlock()
		}
	}
	return 0
}

// CopyFileRange is refused so that the kernel copies through reads and
// writes, which are recorded.
func (n *node) CopyFileRange(context.Context, gofs.FileHandle, uint64, *gofs.Inode, gofs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// file is an open file whose writes are recorded.
type file struct {
	lf  *gofs.LoopbackFile
	fd  int
	ino uint64
	fs  *FS
	gen uint64
	// sync: opened with O_SYNC or O_DSYNC, every write is durable.
	sync bool
}

var (
	_ gofs.FileReader    = (*file)(nil)
	_ gofs.FileWriter    = (*file)(nil)
	_ gofs.FileFsyncer   = (*file)(nil)
	_ gofs.FileSetattrer = (*file)(nil)
	_ gofs.FileGetattrer = (*file)(nil)
	_ gofs.FileAllocater = (*file)(nil)
	_ gofs.FileReleaser  = (*file)(nil)
	_ gofs.FileFlusher   = (*file)(nil)
	_ gofs.FileLseeker   = (*file)(nil)
)

// wrap makes a loopback handle a recorded one.
func (f *FS) wrap(fh gofs.FileHandle, sync bool) (*file, syscall.Errno) {
	lf := fh.(*gofs.LoopbackFile)
	fd, ok := lf.PassthroughFd()
	if !ok {
		lf.Release(context.Background())
		return nil, syscall.EBADF
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, gofs.ToErrno(err)
	}
	return &file{lf: lf, fd: fd, ino: st.Ino, fs: f, gen: f.gen.Load(), sync: sync}, 0
}

// begin takes the filesystem shared and the file's record; it fails with
// EIO for a handle from before a power loss.
func (h *file) begin() (*fileState, func(), syscall.Errno) {
	h.fs.mu.RLock()
	if h.gen != h.fs.gen.Load() {
		h.fs.mu.RUnlock()
		return nil, nil, syscall.EIO
	}
	s := h.fs.state(h.ino)
	s.mu.Lock()
	return s, func() { s.mu.Unlock(); h.fs.mu.RUnlock() }, 0
}

func (h *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	s, end, errno := h.begin()
	if errno != 0 {
		return 0, errno
	}
	defer end()
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return 0, gofs.ToErrno(err)
	}
	if errno := h.fs.record(h.fd, s, off, int64(len(data)), max(st.Size, off+int64(len(data)))); errno != 0 {
		return 0, errno
	}
	n, err := syscall.Pwrite(h.fd, data, off)
	if err != nil {
		return uint32(max(n, 0)), gofs.ToErrno(err)
	}
	if h.sync {
		s.synced()
	}
	return uint32(n), 0
}

// Fsync makes the file durable. The backing file is not synced: the
// backing disk never loses power, only this layer does.
func (h *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	s, end, errno := h.begin()
	if errno != 0 {
		return errno
	}
	defer end()
	s.synced()
	return 0
}

// truncate cuts or extends the file to sz, recorded.
func (h *file) truncate(sz int64) syscall.Errno {
	s, end, errno := h.begin()
	if errno != 0 {
		return errno
	}
	defer end()
	if errno := h.fs.record(h.fd, s, sz, math.MaxInt64-sz, sz); errno != 0 {
		return errno
	}
	return gofs.ToErrno(syscall.Ftruncate(h.fd, sz))
}

func (h *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if errno := h.truncate(int64(sz)); errno != 0 {
			return errno
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	return h.lf.Setattr(ctx, in, out)
}

func (h *file) Allocate(ctx context.Context, off uint64, sz uint64, mode uint32) syscall.Errno {
	s, end, errno := h.begin()
	if errno != 0 {
		return errno
	}
	defer end()
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	if errno := h.fs.record(h.fd, s, int64(off), 0, max(st.Size, int64(off+sz))); errno != 0 {
		return errno
	}
	return h.lf.Allocate(ctx, off, sz, mode)
}

func (h *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, buf, off)
}

func (h *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

func (h *file) Flush(ctx context.Context) syscall.Errno { return h.lf.Flush(ctx) }

func (h *file) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }
