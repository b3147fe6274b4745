package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sessionlog/sessionlog/internal/clientlog"
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
	nf.agentInbox()
	v, err := nf.openVerb(ctx, name, fs, stderr)
	if err != nil {
		return nil, err
	}
	if err := nf.checkInbox(v.ctx, v.nc); err != nil {
		v.close()
		return nil, verbError(v.ctx, err)
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
		notice: func(msg string) {
			out.locked(func() {
				bar.clear()
				fmt.Fprintf(stderr, "warning: %s\n", msg)
			})
		},
		progress: func(done, events int) { out.locked(func() { out.w.Flush(); bar.set(done, events) }) },
		keys: func(msg string) {
			out.locked(func() {
				bar.clear()
				fmt.Fprint(stderr, msg)
			})
		},
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
	// notice is told what the import decided in a file's stead (a file
	// that goes to a new generation of its session).
	notice   func(msg string)
	progress func(done, events int)
	// keys, when set, has a Claude Code file's transcript key recorded
	// once the file is in (recordSourceKey), and is told what went wrong.
	keys func(msg string)
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
	// Files that map to one session id are read one after the other.
	locks := &agentlog.SessionLocks{}
	var wg sync.WaitGroup
	for range mapPerJob * max(opt.jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range jobs {
				sink := newFileSink(ctx, cl, path, opt.batch, limit, locks, opt.out, func(msg string) {
					if opt.notice != nil {
						opt.notice(msg)
					}
				})
				res, err := sink.AppendSink.ReadFile(f, path, agentlog.Options{Warn: opt.warn}, sink)
				if err == nil && opt.keys != nil {
					var msg strings.Builder
					clientlog.RecordSourceKey(ctx, cl, f.Name(), path, "import", &msg)
					if msg.Len() > 0 {
						opt.keys(msg.String())
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
					n.failed++
					if opt.failed != nil {
						opt.failed(path, err)
					}
				case errors.As(err, &de):
					n.failed++
					if opt.failed != nil {
						opt.failed(path, fmt.Errorf("%w: the file was rewritten since it was imported; not imported further", err))
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
	// Read twice a page at a time (what the export must know before it
	// writes, then as it writes), never whole.
	x, err := agentlog.NewExport(f.Name(), sessionEvents(v.ctx, v.cl, id))
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

// sessionEvents reads a session's events through the writer, a page at a
// time from the one after seq after (agentlog.EachStored); a session
// without events is not found.
func sessionEvents(ctx context.Context, cl *client.Client, id string) agentlog.Events {
	return func(after uint64, fn func(*schema.Envelope) error) error {
		found := after > 0
		err := agentlog.EachStored(after, func(after uint64) ([]json.RawMessage, bool, error) {
			r, err := cl.Read(ctx, api.ReadRequest{SessionID: id, AfterSeq: after})
			if err != nil {
				return nil, false, fmt.Errorf("read %s: %w", id, err)
			}
			found = found || len(r.Events) > 0
			return r.Events, r.More, nil
		}, func(e schema.Envelope) error { return fn(&e) })
		switch {
		case errors.Is(err, agentlog.ErrStop):
			return nil
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("session %s: %w", id, errNotFound)
		}
		return nil
	}
}
