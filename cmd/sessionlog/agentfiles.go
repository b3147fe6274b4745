package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// import --from FORMAT and export --to FORMAT: other agents' session files
// (DESIGN.md section 13). The importer is an agent like any other: it
// appends through the writer with pkg/client.

// agentVerb is what import --from and export --to need after their flags.
type agentVerb struct {
	cl    *client.Client
	ctx   context.Context
	close func()
}

func openAgentVerb(ctx context.Context, name string, fs *flag.FlagSet, nf *natsFlags, stderr io.Writer) (*agentVerb, error) {
	v, err := nf.openVerb(ctx, name, fs, stderr)
	if err != nil {
		return nil, err
	}
	return &agentVerb{cl: client.New(v.nc), ctx: v.ctx, close: v.close}, nil
}

func lookupFormat(name string) (agentlog.Format, error) {
	f, ok := formats.Lookup(name)
	if !ok {
		return nil, usageErrorf("unknown format %q (known: %s)", name, strings.Join(formats.Names(), ", "))
	}
	return f, nil
}

// sessionFiles lists the session files under paths: files as given,
// directories walked for the format's files, in lexical order.
func sessionFiles(f agentlog.Format, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && f.IsSessionFile(path) {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// importCounts is what an import did.
type importCounts struct {
	sessions, imported, unchanged, events, skipped, damaged, torn, failed int
}

// runImportFrom is `import --from FORMAT PATH...`.
func runImportFrom(ctx context.Context, fs *flag.FlagSet, nf *natsFlags, from string, batch, jobs int, stdout, stderr io.Writer) (err error) {
	f, err := lookupFormat(from)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("import --from %s needs files or directories", from)
	}
	files, err := sessionFiles(f, fs.Args())
	if err != nil {
		return usageErrorf("%v", err)
	}
	v, err := openAgentVerb(ctx, "import", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	defer func() { err = verbError(v.ctx, err) }()
	out := &lockedWriter{w: bufio.NewWriter(stdout)}
	defer out.flush()
	bar := newProgress(stderr, len(files))
	n, err := importFiles(v.ctx, v.cl, f, files, importOptions{batch: batch, jobs: jobs, out: out,
		warn: func(p string, line int, msg string) {
			out.locked(func() {
				bar.clear()
				fmt.Fprintf(stderr, "warning: %s:%d: skipped: %s\n", p, line, msg)
			})
		},
		failed: func(p string, err error) {
			out.locked(func() {
				bar.clear()
				fmt.Fprintf(stderr, "error: %s: %v\n", p, err)
			})
		},
		progress: func(done, events int) { out.locked(func() { out.w.Flush(); bar.set(done, events) }) },
	})
	bar.clear()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "import: %d files, %d sessions (%d imported, %d unchanged), %d events appended, %d lines mapped to no event, %d damaged lines skipped, %d torn last lines left for later\n",
		len(files), n.sessions, n.imported, n.unchanged, n.events, n.skipped, n.damaged, n.torn)
	if n.failed > 0 {
		return fmt.Errorf("%d files not imported to their end", n.failed)
	}
	return nil
}

// importOptions tune importFiles.
type importOptions struct {
	// batch is the events per append; jobs the appends in flight at once
	// (files are mapped mapPerJob per job, so that each append in flight
	// has the next one being mapped behind it).
	batch, jobs int
	out         io.Writer // per-session lines; nil: none
	warn        func(path string, line int, msg string)
	failed      func(path string, err error) // a file left unfinished
	progress    func(done, events int)
}

// mapPerJob is how many files are mapped per append in flight.
const mapPerJob = 2

// importFiles imports files, jobs appends at a time (each file's sessions
// in order: a branch is forked only after its main session is in). An
// error that stops one file's sessions (the stored log differs from the
// file) is reported and the others go on; any other error stops the
// import.
func importFiles(ctx context.Context, cl *client.Client, f agentlog.Format, files []string, opt importOptions) (importCounts, error) {
	var (
		mu    sync.Mutex
		n     importCounts
		first error
		done  int
	)
	jobs := make(chan string)
	limit := make(chan struct{}, max(opt.jobs, 1))
	var wg sync.WaitGroup
	for range mapPerJob * max(opt.jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range jobs {
				sink := &appendSink{ctx: ctx, cl: cl, batch: opt.batch, out: opt.out, limit: limit}
				res, err := agentlog.ReadFile(f, path, agentlog.Options{Warn: opt.warn}, sink)
				sink.close()
				mu.Lock()
				var de *divergedError
				switch {
				case err == nil:
				case errors.As(err, &de):
					n.failed++
					if opt.failed != nil {
						opt.failed(path, err)
					}
				case first == nil:
					first = fmt.Errorf("%s: %w (files before it are imported; run again to finish)", path, err)
				}
				n.sessions += sink.sessions
				n.imported += sink.imported
				n.unchanged += sink.unchanged
				n.events += sink.appended
				n.skipped += res.Skipped
				n.damaged += res.Damaged
				if res.Torn {
					n.torn++
				}
				done++
				if opt.progress != nil {
					opt.progress(done, n.events)
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range files {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return n, first
}

// lockedWriter serializes the lines of concurrent imports.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) locked(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn()
}

func (l *lockedWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Flush()
}

// divergedError: the stored session is not a prefix of what the file
// maps to now (the file was rewritten, or its main path moved).
type divergedError struct {
	session string
	seq     uint64
	stored  string
	file    string
}

func (e *divergedError) Error() string {
	return fmt.Sprintf("session %s differs from the file at seq %d (stored event %s, the file gives %s): the file was rewritten since it was imported; not imported further",
		e.session, e.seq, e.stored, e.file)
}

// appendSink appends the events of a file's sessions through the writer,
// after what is stored already, in batches. A batch is sent while the
// next one is mapped: at most one append of a session is in flight (the
// writer orders a session's appends by their expected seq, not by their
// arrival), and limit bounds the appends in flight over all sinks.
// Without a limit (ship) each append is answered before flush returns.
type appendSink struct {
	ctx   context.Context
	cl    *client.Client
	batch int
	out   io.Writer // nil: say nothing per session
	// holder names the appender for the lease (ship); "" = no lease.
	holder string
	// limit holds a token per append in flight; nil: one at a time.
	limit chan struct{}

	plan      agentlog.Plan
	tail      uint64 // stored last seq (as of the last answered append)
	tailID    string // stored event id at tail
	pending   []schema.Envelope
	inflight  chan sentAppend // the session's append in flight; nil: none
	added     int             // events appended to the current session
	sessions  int
	imported  int
	unchanged int
	appended  int
}

var _ agentlog.Sink = (*appendSink)(nil)

// sentAppend is the outcome of an append sent by flush.
type sentAppend struct {
	events []schema.Envelope
	res    client.AppendResult
	err    error
}

func (s *appendSink) Session(p agentlog.Plan) error {
	// A session's fork or first append waits for the one before it: a
	// branch is forked only after its main session is in.
	if err := s.wait(); err != nil {
		return err
	}
	s.plan, s.pending, s.added = p, s.pending[:0], 0
	s.sessions++
	if err := s.readTail(); err != nil {
		return err
	}
	if p.Fork != nil && s.tail == 0 {
		_, err := s.cl.Fork(s.ctx, api.ForkRequest{ParentID: p.Fork.ParentID, ChildID: p.ID, At: &api.ForkAt{Seq: client.Seq(p.Fork.Seq)}})
		if err != nil && !errors.Is(err, client.ErrConflict) {
			return fmt.Errorf("fork %s from %s at seq %d: %w", p.ID, p.Fork.ParentID, p.Fork.Seq, err)
		}
		if err := s.readTail(); err != nil {
			return err
		}
	}
	if p.Fork != nil && s.tail < p.FirstSeq-1 {
		// The forker is still copying (or a forker that restarted will
		// finish or abandon the copy): the next run continues after it.
		return fmt.Errorf("fork %s holds %d events, %d once its copy is committed: run the import again", p.ID, s.tail, p.FirstSeq-1)
	}
	return nil
}

// readTail reads the session's last seq and the id of its last event.
func (s *appendSink) readTail() error {
	r, err := s.cl.Read(s.ctx, api.ReadRequest{SessionID: s.plan.ID, Limit: 1})
	if err != nil {
		if client.CodeOf(err) == schema.CodeNotFound {
			s.tail, s.tailID = 0, ""
			return nil
		}
		return fmt.Errorf("read %s: %w", s.plan.ID, err)
	}
	s.tail, s.tailID = r.LastSeq, ""
	if r.LastSeq == 0 {
		return nil
	}
	r, err = s.cl.Read(s.ctx, api.ReadRequest{SessionID: s.plan.ID, AfterSeq: r.LastSeq - 1, Limit: 1})
	if err != nil {
		return fmt.Errorf("read %s: %w", s.plan.ID, err)
	}
	if len(r.Events) == 0 {
		return fmt.Errorf("read %s: no event at its last seq %d", s.plan.ID, s.tail)
	}
	e, err := schema.Decode(r.Events[0])
	if err != nil {
		return fmt.Errorf("read %s: %w", s.plan.ID, err)
	}
	s.tailID = e.EventID
	return nil
}

// Event takes the file's events in seq order. Those up to the tail read
// by Session are stored already (the one at the tail must be the stored
// one); an append in flight holds only events after them, so a tail not
// yet advanced by it changes nothing here.
func (s *appendSink) Event(e schema.Envelope) error {
	switch {
	case e.Seq < s.tail:
		return nil
	case e.Seq == s.tail:
		if e.EventID != s.tailID {
			return &divergedError{session: s.plan.ID, seq: e.Seq, stored: s.tailID, file: e.EventID}
		}
		return nil
	}
	e.Seq, e.SessionID = 0, ""
	s.pending = append(s.pending, e)
	if len(s.pending) >= s.batch {
		return s.flush()
	}
	return nil
}

// flush sends the pending events once the append before them is
// answered, and returns without waiting for their answer.
func (s *appendSink) flush() error {
	if err := s.wait(); err != nil {
		return err
	}
	if len(s.pending) == 0 {
		return nil
	}
	if s.limit != nil {
		select {
		case s.limit <- struct{}{}:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	events := s.pending
	// The batch in flight keeps its array; the next is mapped into another.
	s.pending = make([]schema.Envelope, 0, cap(events))
	req := client.AppendRequest{SessionID: s.plan.ID, ExpectedSeq: client.Seq(s.tail), Holder: s.holder, Events: events}
	done := make(chan sentAppend, 1)
	s.inflight = done
	go func() {
		res, err := s.cl.Append(s.ctx, req)
		if s.limit != nil {
			<-s.limit
		}
		done <- sentAppend{events: events, res: res, err: err}
	}()
	if s.limit == nil {
		return s.wait()
	}
	return nil
}

// wait takes the answer of the append in flight, if any.
func (s *appendSink) wait() error {
	if s.inflight == nil {
		return nil
	}
	a := <-s.inflight
	s.inflight = nil
	if a.err != nil {
		return fmt.Errorf("append to %s after seq %d: %w", s.plan.ID, s.tail, a.err)
	}
	s.tail = a.res.LastSeq
	s.tailID = a.events[len(a.events)-1].EventID
	if !a.res.Duplicate {
		s.added += len(a.events)
		s.appended += len(a.events)
	}
	return nil
}

func (s *appendSink) Done() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.wait(); err != nil {
		return err
	}
	if s.added > 0 {
		s.imported++
		if s.out != nil {
			fmt.Fprintf(s.out, "imported %s %d events\n", s.plan.ID, s.added)
		}
	} else {
		s.unchanged++
		if s.out != nil {
			fmt.Fprintf(s.out, "unchanged %s\n", s.plan.ID)
		}
	}
	return nil
}

// close waits for an append left in flight by an error elsewhere, so
// nothing of the sink outlives ReadFile.
func (s *appendSink) close() {
	_ = s.wait()
}

// runExportTo is `export --to FORMAT --session ID [-o FILE]`.
func runExportTo(ctx context.Context, fs *flag.FlagSet, nf *natsFlags, to, id, outPath string, stdout, stderr io.Writer) (err error) {
	f, err := lookupFormat(to)
	if err != nil {
		return err
	}
	if id == "" || fs.NArg() > 0 {
		return usageErrorf("export --to %s takes --session ID and no arguments", to)
	}
	if !schema.ValidSessionID(id) {
		return usageErrorf("%q is not a valid session id", id)
	}
	v, err := openAgentVerb(ctx, "export", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	defer func() { err = verbError(v.ctx, err) }()
	events, err := readSession(v.ctx, v.cl, id)
	if err != nil {
		return err
	}
	x, err := agentlog.NewExport(f.Name(), events)
	if err != nil {
		return err
	}
	w := stdout
	if outPath != "" && outPath != "-" {
		tmp := outPath + ".tmp"
		file, err := os.Create(tmp)
		if err != nil {
			return err
		}
		defer os.Remove(tmp)
		if err := f.Export(file, x); err != nil {
			file.Close()
			return err
		}
		if err := file.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp, outPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "exported %s to %s (%d source lines, %d events after them)\n", id, outPath, len(x.Lines), len(x.Events))
		return nil
	}
	return f.Export(w, x)
}

// readSession reads every event of a session through the writer.
func readSession(ctx context.Context, cl *client.Client, id string) ([]schema.Envelope, error) {
	var out []schema.Envelope
	var after uint64
	for {
		r, err := cl.Read(ctx, api.ReadRequest{SessionID: id, AfterSeq: after})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		for _, raw := range r.Events {
			e, err := schema.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("read %s after seq %d: %w", id, after, err)
			}
			out = append(out, e)
			after = e.Seq
		}
		if !r.More || len(r.Events) == 0 {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("session %s: %w", id, errNotFound)
	}
	return out, nil
}
