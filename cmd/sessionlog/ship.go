package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ship --from FORMAT DIR...: follow the directories an agent writes its
// session files to, and append each complete new line's events as it
// comes (DESIGN.md section 13). It keeps no state: every pass over a file
// maps it from its first line and appends after the stored tail
// (agentlog.AppendSink, the step the writer's source endpoints share), so
// a restart, or a SIGKILL at any point, loses and doubles nothing.

// shipSettle is how long a burst of writes to one file is gathered before
// the file is read: well under the second the contract allows.
const shipSettle = 150 * time.Millisecond

// shipRescan is how often the followed directories are walked again, for
// what notifications missed: a watch that could not be added (the inotify
// watch limit), events dropped when the kernel's queue overflowed (also
// rescanned at once), a followed directory removed and made again, and a
// file whose last read no writer answered while its agent writes nothing
// more. A file is read again when its size or modification time differs
// from the last read's.
const shipRescan = 10 * time.Second

func runShip(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("ship", stderr)
	from := fs.String("from", "", "the agent's format: claude-code, ...")
	hostDefault, _ := os.Hostname()
	host := fs.String("host", hostDefault, "host name in the holder of each file's sessions")
	batch := fs.Int("batch", 500, "events per atomic append (at most 1000)")
	idle := fs.Duration("idle", shipIdleDefault, "how long a file no process holds open may go unwritten while its agent counts as alive: "+
		"until then ship renews its sessions' leases, after that it lets them lapse and the repairer closes what the agent left open")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *idle < 0 {
		return usageErrorf("--idle must not be negative")
	}
	f, err := lookupFormat(*from)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("ship --from %s needs directories to follow", *from)
	}
	v, err := openAgentVerb(ctx, "ship", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	sh := &shipper{v: v, f: f, host: *host, batch: *batch, stdout: stdout, stderr: stderr, w: w,
		roots: fs.Args(), dirty: map[string]bool{}, files: map[string]*shipFile{}, said: map[string]string{},
		live: newLiveness(v.cl, *idle, stdout)}
	// Watch first, then read what is there: a line written in between is
	// seen by both, and appended once.
	for _, dir := range sh.roots {
		if _, err := os.Stat(dir); err != nil {
			return err
		}
		sh.watchTree(dir)
	}
	go sh.live.run(v.ctx)
	fmt.Fprintf(stdout, "ship: following %d directories as %s\n", fs.NArg(), *from)
	tick := time.NewTicker(shipSettle)
	defer tick.Stop()
	rescan := time.NewTicker(shipRescan)
	defer rescan.Stop()
	for {
		select {
		case <-v.ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			sh.event(ev)
		case err := <-w.Errors:
			fmt.Fprintf(stderr, "ship: watch: %v\n", err)
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

type shipper struct {
	v              *agentVerb
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
func (sh *shipper) watchTree(dir string) { sh.walk(dir, true) }

// rescan walks the followed directories again: it watches what is not
// watched (re-adding a watch is harmless) and marks every session file
// that changed since its last read, or was never read.
func (sh *shipper) rescan() {
	for _, dir := range sh.roots {
		sh.walk(dir, false)
	}
}

func (sh *shipper) walk(dir string, all bool) {
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
func (sh *shipper) tell(p string, err error) {
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
	fmt.Fprintf(sh.stderr, "ship: %s: %v (walked again every %s)\n", p, err, shipRescan)
}

func (sh *shipper) event(ev fsnotify.Event) {
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
func (sh *shipper) pass() {
	var paths []string
	for p := range sh.dirty {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		delete(sh.dirty, p)
		if err := sh.ship(p); err != nil {
			if sh.v.ctx.Err() != nil {
				return
			}
			fmt.Fprintf(sh.stderr, "ship: %s: %v\n", p, err)
		}
	}
}

// ship appends what is new in one file, under the file's holder.
func (sh *shipper) ship(path string) error {
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
	sink := fileAppendSink(sh.v.ctx, clientLog{cl: sh.v.cl, holder: holder}, path, sh.batch,
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

// indexSource records the transcript key of a file that is shipped (it
// reports false when that is to be tried again).
func (sh *shipper) indexSource(path string) bool {
	return recordSourceKey(sh.v.ctx, sh.v.cl, sh.f.Name(), path, "ship", sh.stderr)
}

// recordSourceKey records a Claude Code file's transcript key (project
// directory, session, subagent subpath) with an empty
// sessions.api.source.append, so that the Claude Agent SDK store lists the
// session under its project and no other project's key can claim it
// (DESIGN.md section 15, docs/adr/007-source-index.md). It reports whether
// the key is recorded (or never will be: not a Claude Code transcript
// path, or refused); what went wrong is said on w.
func recordSourceKey(ctx context.Context, cl *client.Client, format, path, verb string, w io.Writer) bool {
	k, ok := ccSourceKey(path)
	if format != "claude-code" || !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := cl.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: k, Entries: []json.RawMessage{}})
	switch client.CodeOf(err) {
	case "":
		if err == nil {
			return true
		}
	case schema.CodeNotCommitted, schema.CodeOutcomeUnknown:
	default:
		// Refused (another project's session, a key the store cannot
		// have): said once, the file is taken in all the same.
		fmt.Fprintf(w, "%s: %s: transcript key %s/%s not recorded: %v\n", verb, path, k.ProjectKey, k.SessionKey, err)
		return true
	}
	// No writer answered, or no answer: tried again on the file's next
	// pass (ship) or the next run (import).
	fmt.Fprintf(w, "%s: %s: recording its transcript key %s/%s: %v\n", verb, path, k.ProjectKey, k.SessionKey, err)
	return false
}

// ccSourceKey is the Claude Agent SDK's key of a Claude Code transcript
// path: <project>/<session>.jsonl, or
// <project>/<session>/subagents/agent-<id>.jsonl.
func ccSourceKey(path string) (api.SourceKey, bool) {
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	dir := filepath.Dir(path)
	k := api.SourceKey{Format: "claude-code", ProjectKey: filepath.Base(dir), SessionKey: name}
	if filepath.Base(dir) == "subagents" {
		session := filepath.Dir(dir)
		k = api.SourceKey{Format: "claude-code", ProjectKey: filepath.Base(filepath.Dir(session)), SessionKey: filepath.Base(session),
			Subpath: "subagents/" + name}
	}
	return k, k.ProjectKey != "" && k.ProjectKey != "." && k.ProjectKey != string(filepath.Separator)
}

// clientLog is agentlog.Log on the Go client: appends under holder.
type clientLog struct {
	cl     *client.Client
	holder string
}

// Tail reads the session's last seq, then the event at it.
func (l clientLog) Tail(ctx context.Context, id string) (uint64, string, error) {
	page, err := l.cl.Read(ctx, api.ReadRequest{SessionID: id, Limit: 1})
	switch {
	case client.CodeOf(err) == schema.CodeNotFound:
		return 0, "", nil
	case err != nil || page.LastSeq == 0:
		return 0, "", err
	}
	last := page.LastSeq
	if page, err = l.cl.Read(ctx, api.ReadRequest{SessionID: id, AfterSeq: last - 1, Limit: 1}); err != nil {
		return 0, "", err
	}
	if len(page.Events) == 0 {
		return 0, "", fmt.Errorf("no event at its last seq %d", last)
	}
	e, err := schema.Decode(page.Events[0])
	return last, e.EventID, err
}

func (l clientLog) Append(ctx context.Context, id string, expected uint64, events []schema.Envelope) (uint64, bool, error) {
	r, err := l.cl.Append(ctx, client.AppendRequest{SessionID: id, ExpectedSeq: client.Seq(expected), Holder: l.holder, Events: events})
	return r.LastSeq, r.Duplicate, err
}

func (l clientLog) Fork(ctx context.Context, parent, child string, seq uint64) error {
	_, err := l.cl.Fork(ctx, api.ForkRequest{ParentID: parent, ChildID: child, At: &api.ForkAt{Seq: client.Seq(seq)}})
	if errors.Is(err, client.ErrConflict) {
		return nil // the child exists
	}
	return err
}

// holderOf is the lease holder of a file's sessions: host, format and file
// name, as one id (DESIGN.md writes it <host>/<format>/<file>; a holder is
// an item id, which has no "/", so the parts are joined with ":").
func holderOf(host, format, path string) string {
	return agentlog.ItemID(host + ":" + format + ":" + filepath.Base(path))
}
