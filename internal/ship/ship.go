// Package ship follows the directories an agent writes its session
// files to, and appends each complete new line's events as it comes
// (DESIGN.md section 13): the logic of `sessionlog ship`.
//
// It keeps no state: every pass over a file maps it from its first line
// and appends after the stored tail (agentlog.AppendSink, the step the
// source service's endpoints share, on the one adapter clientlog), so a
// restart, or a SIGKILL at any point, loses and doubles nothing.
package ship

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sessionlog/sessionlog/internal/clientlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Settle is how long a burst of writes to one file is gathered before
// the file is read: well under the second the contract allows.
const Settle = 150 * time.Millisecond

// Rescan is how often the followed directories are walked again, for
// what notifications missed: a watch that could not be added (the inotify
// watch limit), events dropped when the kernel's queue overflowed (also
// rescanned at once), a followed directory removed and made again, and a
// file whose last read no writer answered while its agent writes nothing
// more. A file is read again when its size or modification time differs
// from the last read's.
const Rescan = 10 * time.Second

// Config is what a shipper ships with.
type Config struct {
	// Client appends through the writer.
	Client *client.Client
	// Format is the agent's format.
	Format agentlog.Format
	// Host is the host name in the holder of each file's sessions.
	Host string
	// Batch is the events per atomic append (at most 1000).
	Batch int
	// Idle is how long a file no process holds open may go unwritten
	// while its agent counts as alive (liveness).
	Idle time.Duration
	// Stdout has a line per file read; Stderr the problems.
	Stdout, Stderr io.Writer
}

// Follow follows dirs (which must exist) and ships what their session
// files hold and gain until ctx ends.
func (sh *Shipper) Follow(dirs []string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	sh.w, sh.roots = w, dirs
	// Watch first, then read what is there: a line written in between is
	// seen by both, and appended once.
	for _, dir := range sh.roots {
		if _, err := os.Stat(dir); err != nil {
			return err
		}
		sh.watchTree(dir)
	}
	go sh.live.run(sh.ctx)
	fmt.Fprintf(sh.stdout, "ship: following %d directories as %s\n", len(dirs), sh.f.Name())
	tick := time.NewTicker(Settle)
	defer tick.Stop()
	rescan := time.NewTicker(Rescan)
	defer rescan.Stop()
	for {
		select {
		case <-sh.ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			sh.event(ev)
		case err := <-w.Errors:
			fmt.Fprintf(sh.stderr, "ship: watch: %v\n", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				sh.rescan() // events were dropped
			}
		case <-rescan.C:
			sh.rescan()
		case <-tick.C:
			sh.pass()
		}
	}
}

// Shipper ships the files of one format.
type Shipper struct {
	ctx            context.Context
	cl             *client.Client
	f              agentlog.Format
	host           string
	batch          int
	stdout, stderr io.Writer
	w              *fsnotify.Watcher
	roots          []string // the directories followed
	dirty          map[string]bool
	files          map[string]*shipFile
	// said: the last problem told of each path that is walked (a watch
	// not added, a directory not readable), so a rescan repeats none.
	said map[string]string
	live *liveness
	// stored: the sessions with a repair in them, as the last pass left
	// them (agentlog.StoredCache).
	stored agentlog.StoredCache
}

// New is a shipper of files of cfg.Format that follows no directory yet
// (Follow follows them; Ship reads one file).
func New(ctx context.Context, cfg Config) *Shipper {
	return &Shipper{ctx: ctx, cl: cfg.Client, f: cfg.Format, host: cfg.Host, batch: cfg.Batch, stdout: cfg.Stdout, stderr: cfg.Stderr,
		dirty: map[string]bool{}, files: map[string]*shipFile{}, said: map[string]string{},
		live: newLiveness(cfg.Client, cfg.Idle, cfg.Stdout)}
}

// shipFile is the metrics of one followed file.
type shipFile struct {
	lines, appended, skipped int
	lag                      time.Duration
	// indexed: the file's transcript key is recorded for the Claude Agent
	// SDK store's listings (indexSource).
	indexed bool
	// read: size and modTime are the file's before its last read (unset
	// after a read no writer answered, so a rescan reads it again).
	read    bool
	size    int64
	modTime time.Time
}

// watchTree watches dir and every directory under it, and marks every
// session file in them for reading. What cannot be watched or read is
// told once and walked past: the rescan finds its files all the same.
func (sh *Shipper) watchTree(dir string) { sh.walk(dir, true) }

// rescan walks the followed directories again: it watches what is not
// watched (re-adding a watch is harmless) and marks every session file
// that changed since its last read, or was never read.
func (sh *Shipper) rescan() {
	for _, dir := range sh.roots {
		sh.walk(dir, false)
	}
}

func (sh *Shipper) walk(dir string, all bool) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			sh.tell(p, err) // a directory that went away or cannot be read
			return nil
		}
		if d.IsDir() {
			sh.tell(p, sh.w.Add(p))
			return nil
		}
		if !d.Type().IsRegular() || !sh.f.IsSessionFile(p) {
			return nil
		}
		if all {
			sh.dirty[p] = true
			return nil
		}
		info, err := d.Info()
		if m := sh.files[p]; err == nil && (m == nil || !m.read || m.size != info.Size() || !m.modTime.Equal(info.ModTime())) {
			sh.dirty[p] = true
		}
		return nil
	})
}

// tell says a path's problem once (err nil: the path is fine again).
func (sh *Shipper) tell(p string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if sh.said[p] == msg {
		return
	}
	if msg == "" {
		delete(sh.said, p)
		return
	}
	sh.said[p] = msg
	fmt.Fprintf(sh.stderr, "ship: %s: %v (walked again every %s)\n", p, err, Rescan)
}

func (sh *Shipper) event(ev fsnotify.Event) {
	if ev.Op&(fsnotify.Create|fsnotify.Write) == 0 {
		return
	}
	info, err := os.Stat(ev.Name)
	if err != nil {
		return
	}
	if info.IsDir() {
		sh.watchTree(ev.Name)
		return
	}
	if sh.f.IsSessionFile(ev.Name) {
		sh.dirty[ev.Name] = true
	}
}

// pass reads every file written since the last pass.
func (sh *Shipper) pass() {
	var paths []string
	for p := range sh.dirty {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		delete(sh.dirty, p)
		if err := sh.Ship(p); err != nil {
			if sh.ctx.Err() != nil {
				return
			}
			fmt.Fprintf(sh.stderr, "ship: %s: %v\n", p, err)
		}
	}
}

// Ship appends what is new in one file, under the file's holder.
func (sh *Shipper) Ship(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	m := sh.files[path]
	if m == nil {
		m = &shipFile{}
		sh.files[path] = m
	}
	appended := 0
	holder := holderOf(sh.host, sh.f.Name(), path)
	var sessions []string
	sink := clientlog.FileSink(sh.ctx, sh.log(holder), path, sh.batch,
		func(msg string) { fmt.Fprintf(sh.stderr, "warning: %s\n", msg) })
	sink.Finished = func(p agentlog.Plan, _ uint64, _ string, added int) {
		appended += added
		sessions = append(sessions, p.ID)
	}
	sink.Cache = &sh.stored
	res, err := sink.ReadFile(sh.f, path, agentlog.Options{Warn: func(p string, line int, msg string) {
		fmt.Fprintf(sh.stderr, "warning: %s:%d: skipped: %s\n", p, line, msg)
	}}, nil)
	for _, r := range res.Sessions {
		sessions = append(sessions, r.ID)
	}
	sh.live.note(path, holder, info, sessions)
	// A read that no writer answered (nothing stored, or no answer) is
	// tried again by the next rescan though the file does not change (its
	// agent may write nothing more for an hour); any other outcome waits
	// for the file to change.
	code := client.CodeOf(err)
	m.read = code != schema.CodeNotCommitted && code != schema.CodeOutcomeUnknown
	m.size, m.modTime = info.Size(), info.ModTime()
	m.appended += appended
	if appended > 0 {
		m.lag = time.Since(info.ModTime())
	}
	m.lines, m.skipped = res.Lines, res.Skipped
	if appended > 0 || err != nil {
		fmt.Fprintf(sh.stdout, "ship: %s lines_read=%d events_appended=%d lines_skipped=%d lag_ms=%d\n",
			path, m.lines, m.appended, m.skipped, m.lag.Milliseconds())
	}
	var de *agentlog.DivergedError
	if errors.As(err, &de) {
		return fmt.Errorf("%w: the file was rewritten since it was shipped; not shipped further", de)
	}
	if err == nil && !m.indexed && len(res.Sessions) > 0 {
		m.indexed = sh.indexSource(path)
	}
	return err
}

// log is the log a file's sessions are appended to under holder: the
// adapter the source service appends through too.
func (sh *Shipper) log(holder string) clientlog.Log {
	return clientlog.Log{Client: sh.cl, Holder: holder}
}

// indexSource records the transcript key of a file that is shipped (it
// reports false when that is to be tried again).
func (sh *Shipper) indexSource(path string) bool {
	return clientlog.RecordSourceKey(sh.ctx, sh.cl, sh.f.Name(), path, "ship", sh.stderr)
}

// holderOf is the lease holder of a file's sessions: host, format and file
// name, as one id (DESIGN.md writes it <host>/<format>/<file>; a holder is
// an item id, which has no "/", so the parts are joined with ":").
func holderOf(host, format, path string) string {
	return agentlog.ItemID(host + ":" + format + ":" + filepath.Base(path))
}
