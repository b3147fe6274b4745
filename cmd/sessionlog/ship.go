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

func runShip(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("ship", stderr)
	from := fs.String("from", "", "the agent's format: claude-code, ...")
	hostDefault, _ := os.Hostname()
	host := fs.String("host", hostDefault, "host name in the holder of each file's sessions")
	batch := fs.Int("batch", 500, "events per atomic append (at most 1000)")
	if err := parseFlags(fs, args); err != nil {
		return err
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
		dirty: map[string]bool{}, files: map[string]*shipFile{}}
	// Watch first, then read what is there: a line written in between is
	// seen by both, and appended once.
	for _, dir := range fs.Args() {
		if err := sh.watchTree(dir); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "ship: following %d directories as %s\n", fs.NArg(), *from)
	tick := time.NewTicker(shipSettle)
	defer tick.Stop()
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
	dirty          map[string]bool
	files          map[string]*shipFile
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
}

// watchTree watches dir and every directory under it, and marks every
// session file in them for reading.
func (sh *shipper) watchTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return sh.w.Add(p)
		}
		if d.Type().IsRegular() && sh.f.IsSessionFile(p) {
			sh.dirty[p] = true
		}
		return nil
	})
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
		if err := sh.watchTree(ev.Name); err != nil {
			fmt.Fprintf(sh.stderr, "ship: %v\n", err)
		}
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
	sink := fileAppendSink(sh.v.ctx, clientLog{cl: sh.v.cl, holder: holderOf(sh.host, sh.f.Name(), path)}, path, sh.batch,
		func(msg string) { fmt.Fprintf(sh.stderr, "warning: %s\n", msg) })
	sink.Finished = func(_ agentlog.Plan, _ uint64, _ string, added int) { appended += added }
	sink.Cache = &sh.stored
	res, err := sink.ReadFile(sh.f, path, agentlog.Options{Warn: func(p string, line int, msg string) {
		fmt.Fprintf(sh.stderr, "warning: %s:%d: skipped: %s\n", p, line, msg)
	}}, nil)
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
