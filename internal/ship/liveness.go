package ship

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A followed file's agent is alive while its writer is (DESIGN.md section
// 13): ship renews the leases of a file's sessions while a process holds
// the file open or it changed within --idle, and lets them lapse after
// that, so the repairer closes only what a gone agent left open. An agent
// that waits on its user or on a long tool call for far longer than the
// lease TTL keeps its sessions while it holds its file open, or for --idle
// after its last write; when its file grows again after a lapse the leases
// are taken again.

const (
	// IdleDefault is --idle: how long a file nobody holds open may go
	// unwritten while its agent still counts as alive (an agent waiting on
	// its user for minutes writes nothing).
	IdleDefault = 30 * time.Minute
	// livenessFirst is the period of the rounds until a heartbeat's reply
	// has said the lease TTL (a third of the default TTL); after that it
	// is a third of the TTL, as the writer expects of a live holder. Until
	// then a file read with sessions also starts a round at once, so the
	// TTL is known soon after the first append, however short it is.
	livenessFirst = 10 * time.Second
	livenessMin   = 100 * time.Millisecond
	// heartbeatTimeout bounds one heartbeat request.
	heartbeatTimeout = 5 * time.Second
)

// heartbeater renews a holder's lease of a session (the Go client).
type heartbeater interface {
	Heartbeat(ctx context.Context, sessionID, holder string) (client.HeartbeatResult, error)
}

var _ heartbeater = (*client.Client)(nil)

// liveness keeps the leases of the followed files' sessions while their
// agents are alive. ship notes each file it read; run renews, every third
// of the lease TTL, the leases of the files found alive in one round: a
// stat of each file and at most one scan of the open files of all
// processes (only when a file whose leases are kept has been quiet for
// longer than idle).
type liveness struct {
	hb     heartbeater
	idle   time.Duration
	now    func() time.Time
	self   int    // this process: its own reads do not hold a file open
	proc   string // the proc file system ("/proc")
	stdout io.Writer

	// kick starts a round before the period is known.
	kick chan struct{}

	mu    sync.Mutex
	files map[string]*liveFile
	ttl   time.Duration // the shortest TTL a heartbeat was given (0: none yet)
}

// liveFile is one followed file. holder and sessions are set by note
// (under mu); the rest belongs to run.
type liveFile struct {
	path, real string // as followed; absolute with symlinks resolved
	holder     string
	sessions   []string

	size    int64
	mod     time.Time
	changed time.Time // the last change seen: a round's stat or the first note
	state   int       // the last round's verdict: 0 none yet, alive or quiet
	refused map[string]bool
}

const (
	liveAlive = 1
	liveQuiet = 2
)

func newLiveness(hb heartbeater, idle time.Duration, stdout io.Writer) *liveness {
	return &liveness{hb: hb, idle: idle, now: time.Now, self: os.Getpid(), proc: "/proc", stdout: stdout,
		kick: make(chan struct{}, 1), files: map[string]*liveFile{}}
}

// note records that ship read path (whose stat before the read was info)
// and that its lines went to sessions, appended under holder. A file seen
// for the first time counts as changed at its modification time.
func (lv *liveness) note(path, holder string, info os.FileInfo, sessions []string) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	f := lv.files[path]
	if f == nil {
		f = &liveFile{path: path, real: realPath(path), size: info.Size(), mod: info.ModTime(), changed: info.ModTime(),
			refused: map[string]bool{}}
		lv.files[path] = f
	}
	f.holder = holder
	for _, id := range sessions {
		if !slices.Contains(f.sessions, id) {
			f.sessions = append(f.sessions, id)
		}
	}
	if lv.ttl == 0 && len(sessions) > 0 {
		select {
		case lv.kick <- struct{}{}:
		default:
		}
	}
}

// realPath is how /proc names the file at path: absolute, symlinks
// resolved.
func realPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

// run renews leases until ctx ends: a round every third of the shortest
// TTL the heartbeats were given (livenessFirst before any). After a round
// in which another holder's lease was in the way, the next comes three
// times sooner: that lease may lapse at any moment, and the repairer waits
// only its grace (5 s by default, under a third of the default TTL) before
// it repairs.
func (lv *liveness) run(ctx context.Context) {
	t := time.NewTimer(livenessFirst)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-lv.kick:
			t.Stop() // Go 1.23 timers: no stale tick after Stop
		}
		ttl, held := lv.round(ctx)
		lv.mu.Lock()
		if ttl > 0 && (lv.ttl == 0 || ttl < lv.ttl) {
			lv.ttl = ttl
		}
		period := livenessFirst
		if lv.ttl > 0 {
			period = lv.ttl / 3
		}
		lv.mu.Unlock()
		if held {
			period /= 3
		}
		t.Reset(max(period, livenessMin))
	}
}

// round looks at every followed file once and renews the leases of the
// live ones; it returns the shortest lease TTL a heartbeat was given (0:
// none answered) and whether another holder's lease refused one.
func (lv *liveness) round(ctx context.Context) (ttl time.Duration, held bool) {
	lv.mu.Lock()
	files := make([]*liveFile, 0, len(lv.files))
	for _, f := range lv.files {
		files = append(files, f)
	}
	lv.mu.Unlock()

	now := lv.now()
	// quiet: unchanged for idle; ask: those of them whose leases may still
	// be kept (a file found quiet and closed lets its leases lapse and
	// takes them again when it changes: no scan is made for it).
	quiet, ask := map[string]bool{}, map[string]bool{}
	var kept []*liveFile
	for _, f := range files {
		info, err := os.Stat(f.path)
		if err != nil {
			if os.IsNotExist(err) {
				// Removed: nothing writes it any more.
				lv.mu.Lock()
				delete(lv.files, f.path)
				lv.mu.Unlock()
			}
			continue
		}
		if info.Size() != f.size || !info.ModTime().Equal(f.mod) {
			f.size, f.mod, f.changed = info.Size(), info.ModTime(), now
		}
		if now.Sub(f.changed) >= lv.idle {
			quiet[f.real] = true
			if f.state != liveQuiet {
				ask[f.real] = true
			}
		}
		kept = append(kept, f)
	}
	open := map[string]bool{}
	if len(ask) > 0 {
		open = heldOpen(lv.proc, ask, lv.self)
	}

	failed := false
	for _, f := range kept {
		alive := !quiet[f.real] || open[f.real]
		lv.say(f, alive)
		if !alive {
			continue
		}
		lv.mu.Lock()
		holder, sessions := f.holder, append([]string(nil), f.sessions...)
		lv.mu.Unlock()
		for _, id := range sessions {
			cctx, cancel := context.WithTimeout(ctx, heartbeatTimeout)
			r, err := lv.hb.Heartbeat(cctx, id, holder)
			cancel()
			switch code := client.CodeOf(err); {
			case err == nil:
				if r.TTL > 0 && (ttl == 0 || r.TTL < ttl) {
					ttl = r.TTL
				}
				delete(f.refused, id)
			case code == schema.CodeNotFound:
				// Not stored yet (nothing of the file mapped to it).
			case code == schema.CodeConflict:
				// Another holder's live lease: not taken from it. Its
				// holder keeps the session alive; once it lapses, a
				// round takes it.
				held = true
				if !f.refused[id] {
					f.refused[id] = true
					fmt.Fprintf(lv.stdout, "ship: %s: lease of %s not renewed: %v\n", f.path, id, err)
				}
			default:
				if ctx.Err() != nil {
					return ttl, held
				}
				if !failed {
					failed = true // once a round: an outage fails them all
					fmt.Fprintf(lv.stdout, "ship: %s: lease of %s not renewed (tried again in the next round): %v\n", f.path, id, err)
				}
			}
		}
	}
	return ttl, held
}

// say tells when a file's verdict changes after its first.
func (lv *liveness) say(f *liveFile, alive bool) {
	state := liveQuiet
	if alive {
		state = liveAlive
	}
	was := f.state
	f.state = state
	switch {
	case was == 0 || was == state:
	case alive:
		fmt.Fprintf(lv.stdout, "ship: %s written again: its sessions' leases are renewed\n", f.path)
	default:
		fmt.Fprintf(lv.stdout, "ship: %s not written for %s and held open by no process: its sessions' leases lapse\n",
			f.path, lv.idle)
	}
}

// heldOpen returns which of paths (absolute, symlinks resolved) a process
// other than self holds open, from the links of /proc/<pid>/fd (Linux;
// elsewhere, and for processes whose descriptors this user cannot read,
// none are found). One scan reads each readable descriptor link once,
// whatever the number of paths.
func heldOpen(proc string, paths map[string]bool, self int) map[string]bool {
	out := map[string]bool{}
	d, err := os.Open(proc)
	if err != nil {
		return out
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		dir := proc + "/" + name + "/fd"
		fd, err := os.Open(dir)
		if err != nil {
			continue // gone, or another user's
		}
		fds, _ := fd.Readdirnames(-1)
		fd.Close()
		for _, n := range fds {
			target, err := os.Readlink(dir + "/" + n)
			if err == nil && paths[target] {
				out[target] = true
				if len(out) == len(paths) {
					return out
				}
			}
		}
	}
	return out
}
