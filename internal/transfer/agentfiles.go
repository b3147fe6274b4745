package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sessionlog/sessionlog/internal/clientlog"
	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// import --from FORMAT and export --to FORMAT: other agents' session files
// (DESIGN.md section 13). The importer is an agent like any other: it
// appends through the writer with pkg/client (internal/clientlog).

// SessionFiles lists the session files under paths: files as given,
// directories walked for the format's files, in lexical order.
func SessionFiles(f agentlog.Format, paths []string) ([]string, error) {
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

// Counts is what an import did.
type Counts struct {
	Sessions, Imported, Unchanged, Events, Skipped, Damaged, Torn, Failed int
}

// Options tune ImportFiles.
type Options struct {
	// Batch is the events per append; Jobs the appends in flight at once
	// (files are mapped mapPerJob per job, so that each append in flight
	// has the next one being mapped behind it).
	Batch, Jobs int
	Out         io.Writer // per-session lines; nil: none
	Warn        func(path string, line int, msg string)
	Failed      func(path string, err error) // a file left unfinished
	// Notice is told what the import decided in a file's stead (a file
	// that goes to a new generation of its session).
	Notice   func(msg string)
	Progress func(done, events int)
	// Keys, when set, has a Claude Code file's transcript key recorded
	// once the file is in (clientlog.RecordSourceKey), and is told what
	// went wrong.
	Keys func(msg string)
}

// The import verb's defaults: events per append (fewer, with an agent's
// files, when their bytes would take a request over the server's
// max_payload), and appends in flight at once.
const (
	DefaultBatch = 500
	DefaultJobs  = 4
)

// mapPerJob is how many files are mapped per append in flight.
const mapPerJob = 2

// ImportFiles imports files, jobs appends at a time (each file's sessions
// in order: a branch is forked only after its main session is in). An
// error that stops one file's sessions (the stored log differs from the
// file) is reported and the others go on; any other error stops the
// import.
func ImportFiles(ctx context.Context, cl *client.Client, f agentlog.Format, files []string, opt Options) (Counts, error) {
	var (
		mu    sync.Mutex
		n     Counts
		first error
		done  int
	)
	jobs := make(chan string)
	limit := make(chan struct{}, max(opt.Jobs, 1))
	// Files that map to one session id are read one after the other.
	locks := &agentlog.SessionLocks{}
	var wg sync.WaitGroup
	for range mapPerJob * max(opt.Jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range jobs {
				sink := newFileSink(ctx, cl, path, opt.Batch, limit, locks, opt.Out, func(msg string) {
					if opt.Notice != nil {
						opt.Notice(msg)
					}
				})
				res, err := sink.AppendSink.ReadFile(f, path, agentlog.Options{Warn: opt.Warn}, sink)
				if err == nil && opt.Keys != nil {
					var msg strings.Builder
					clientlog.RecordSourceKey(ctx, cl, f.Name(), path, "import", &msg)
					if msg.Len() > 0 {
						opt.Keys(msg.String())
					}
				}
				mu.Lock()
				var (
					de *agentlog.DivergedError
					ce *agentlog.CollisionError
				)
				switch {
				case err == nil:
				case errors.As(err, &ce):
					n.Failed++
					if opt.Failed != nil {
						opt.Failed(path, err)
					}
				case errors.As(err, &de):
					n.Failed++
					if opt.Failed != nil {
						opt.Failed(path, fmt.Errorf("%w: the file was rewritten since it was imported; not imported further", err))
					}
				case first == nil:
					first = fmt.Errorf("%s: %w (files before it are imported; run again to finish)", path, err)
				}
				n.Sessions += sink.sessions
				n.Imported += sink.imported
				n.Unchanged += sink.unchanged
				n.Events += sink.appended
				n.Skipped += res.Skipped
				n.Damaged += res.Damaged
				if res.Torn {
					n.Torn++
				}
				done++
				if opt.Progress != nil {
					opt.Progress(done, n.Events)
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

// fileSink is the import's agentlog.AppendSink over the Go client, with
// the counts of a file's sessions.
type fileSink struct {
	*agentlog.AppendSink
	sessions, imported, unchanged, appended int
}

func newFileSink(ctx context.Context, cl *client.Client, path string, batch int, limit chan struct{}, locks *agentlog.SessionLocks, out io.Writer, warn func(string)) *fileSink {
	fsk := &fileSink{}
	fsk.AppendSink = clientlog.FileSink(ctx, clientlog.Log{Client: cl}, path, batch, warn)
	fsk.InFlight, fsk.Locks = limit, locks
	fsk.Finished = func(p agentlog.Plan, _ uint64, _ string, added int) {
		fsk.appended += added
		if added > 0 {
			fsk.imported++
			if out != nil {
				fmt.Fprintf(out, "imported %s %d events\n", p.ID, added)
			}
			return
		}
		fsk.unchanged++
		if out != nil {
			fmt.Fprintf(out, "unchanged %s\n", p.ID)
		}
	}
	return fsk
}

// Session counts the session, then reads its tail (forking it first).
func (f *fileSink) Session(p agentlog.Plan) error {
	f.sessions++
	return f.AppendSink.Session(p)
}

// ImportFrom imports an agent's session files (import --from): batch
// events per append, jobs appends in flight; a line per session on
// stdout, warnings, errors and a progress bar on stderr.
func ImportFrom(ctx context.Context, cl *client.Client, f agentlog.Format, files []string, batch, jobs int, stdout, stderr io.Writer) error {
	out := &lockedWriter{w: bufio.NewWriter(stdout)}
	defer out.flush()
	bar := progress.New(stderr, len(files))
	n, err := ImportFiles(ctx, cl, f, files, Options{Batch: batch, Jobs: jobs, Out: out,
		Warn: func(p string, line int, msg string) {
			out.locked(func() {
				bar.Clear()
				fmt.Fprintf(stderr, "warning: %s:%d: skipped: %s\n", p, line, msg)
			})
		},
		Failed: func(p string, err error) {
			out.locked(func() {
				bar.Clear()
				fmt.Fprintf(stderr, "error: %s: %v\n", p, err)
			})
		},
		Notice: func(msg string) {
			out.locked(func() {
				bar.Clear()
				fmt.Fprintf(stderr, "warning: %s\n", msg)
			})
		},
		Progress: func(done, events int) { out.locked(func() { out.w.Flush(); bar.Set(done, events) }) },
		Keys: func(msg string) {
			out.locked(func() {
				bar.Clear()
				fmt.Fprint(stderr, msg)
			})
		},
	})
	bar.Clear()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "import: %d files, %d sessions (%d imported, %d unchanged), %d events appended, %d lines mapped to no event, %d damaged lines skipped, %d torn last lines left for later\n",
		len(files), n.Sessions, n.Imported, n.Unchanged, n.Events, n.Skipped, n.Damaged, n.Torn)
	if n.Failed > 0 {
		return fmt.Errorf("%d files not imported to their end", n.Failed)
	}
	return nil
}

// ExportTo writes session id, read through the writer, as a session
// file of format f (export --to): to outPath (written whole, then
// renamed), or to stdout when outPath is "" or "-".
func ExportTo(ctx context.Context, cl *client.Client, f agentlog.Format, id, outPath string, stdout, stderr io.Writer) error {
	// Read twice a page at a time (what the export must know before it
	// writes, then as it writes), never whole.
	x, err := agentlog.NewExport(f.Name(), SessionEvents(ctx, cl, id))
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
		fmt.Fprintf(stderr, "exported %s to %s (%d source lines, %d events after them)\n", id, outPath, x.Lines, x.After)
		return nil
	}
	return f.Export(w, x)
}

// SessionEvents reads a session's events through the writer, a page at a
// time from the one after seq after (agentlog.EachStored); a session
// without events is not found. The events name the session as id does
// (api.AskedID): an agent of a tenant reads them as stored, under
// _T<tenant>_<id>, and a file of an agent's format takes its ids from
// them, so the agent's file carries the ids it knows, never the stored
// one; an operator, who names the stored id, keeps it.
func SessionEvents(ctx context.Context, cl *client.Client, id string) agentlog.Events {
	return func(after uint64, fn func(*schema.Envelope) error) error {
		p := readPages{ctx: ctx, cl: cl, id: id, found: after > 0}
		err := agentlog.EachStored(after, p.next, func(e schema.Envelope) error {
			e.SessionID = api.AskedID(e.SessionID, id)
			return fn(&e)
		})
		return p.end(err)
	}
}

// readPages reads session id through the writer's read API, a page at a
// time: its next is agentlog.EachStored's.
type readPages struct {
	ctx   context.Context
	cl    *client.Client
	id    string
	found bool              // a page held an event
	page  []json.RawMessage // the last page read
	at    int               // the index in page of the next event to take
	upTo  uint64            // when set, no page asks past this seq
	pages int               // the pages asked for
}

// notExported is the error of an export that skipped sessions.
func notExported(skipped []string) error {
	if len(skipped) == 0 {
		return nil
	}
	return fmt.Errorf("%d sessions not exported (unreadable or with a gap): %s", len(skipped), strings.Join(skipped, ", "))
}

// take is the stored bytes of the page's next event.
func (p *readPages) take() json.RawMessage {
	e := p.page[p.at]
	p.at++
	return e
}

func (p *readPages) next(after uint64) ([]json.RawMessage, bool, error) {
	req := api.ReadRequest{SessionID: p.id, AfterSeq: after}
	if p.upTo > 0 {
		if after >= p.upTo {
			return nil, false, nil
		}
		req.Limit = int(min(p.upTo-after, api.MaxReadLimit))
	}
	p.pages++
	r, err := p.cl.Read(p.ctx, req)
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", p.id, err)
	}
	p.found = p.found || len(r.Events) > 0
	p.page, p.at = r.Events, 0
	return r.Events, r.More, nil
}

// end is the read's error: err (agentlog.ErrStop: none), or not found for
// a session without events.
func (p *readPages) end(err error) error {
	switch {
	case errors.Is(err, agentlog.ErrStop):
		return nil
	case err != nil:
		return err
	case !p.found:
		return fmt.Errorf("session %s: %w", p.id, sre.ErrNotFound)
	}
	return nil
}
