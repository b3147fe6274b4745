package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Export writes the sessions ids to stdout as JSON lines, one stored
// envelope per line exactly as stored, sessions one after another in seq
// order, each read twice from the store (storeExport) and written as its
// second read reads it, so that a session of any length is exported in
// the memory of a few batches of it. A session whose first read cannot
// read it to its end is not written, said on stderr and named in the
// error. A session erased during its export (listed is set when ids are
// every session the store listed: one erased before its first read is
// erased since the list; a session named, erased before its first read,
// is an error) is left out (exportSession): said on stderr and counted
// in the summary, no error; of its lines only those written out before
// the export learned it stay on stdout (lineWriter). A session whose
// second read fails or gives other events than the first, and that has no
// erasure record, ends the export, after the lines of its second read
// written so far (each line whole), all of which end up on stdout.
func Export(ctx context.Context, st *logstore.Store, ids []string, listed bool, stdout, stderr io.Writer) error {
	x := &storeExport{ctx: ctx, st: st, listed: listed, say: "not exported: %[2]v\n", exportTally: exportTally{stderr: stderr}}
	defer x.watch()()
	return exportLines(x, &x.exportTally, ids, stdout)
}

// exportLines is Export and ExportRead: the sessions ids read by x,
// written to stdout through a lineWriter.
func exportLines(x sessionReader, t *exportTally, ids []string, stdout io.Writer) error {
	w := &lineWriter{w: stdout}
	var events int
	for _, id := range ids {
		w.begin(guard(x, id))
		n := 0
		ok, err := exportSession(t, x, id, sessionOut{
			add: func(raw json.RawMessage, _ *schema.Envelope) error {
				n++
				return w.line(raw)
			},
			sent: func() int { return w.out },
			unit: "lines",
		})
		w.end(ok || err != nil)
		if err != nil {
			return errors.Join(err, w.flush())
		}
		if ok {
			events += n
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	fmt.Fprintf(t.stderr, "exported %d sessions, %d events%s\n", t.exported, events, t.leftOut())
	return t.failed()
}

// lineWriter is the JSON lines export's buffer of stdout (lineBuffer
// bytes, then written out), which knows where the lines of the session
// under way begin in it: a session left out drops those not yet written
// out, and before a write that holds any, guard (the session's erasure
// check) may stop it. Of a session erased during its export, only the
// lines written out before the export learned it are on stdout.
type lineWriter struct {
	w     io.Writer
	buf   []byte
	mark  int          // where in buf the session under way's lines begin
	guard func() error // before a write holding any of the session's lines
	lines int          // the session's lines in buf
	out   int          // the session's lines written out
}

// lineBuffer is what a lineWriter holds before it writes out (a
// bufio.Writer's of the export before).
const lineBuffer = 1 << 20

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// line buffers a stored body as a line (sre.WriteLine), writing out when
// the buffer is full.
func (l *lineWriter) line(raw json.RawMessage) error {
	if err := sre.WriteLine(l, raw); err != nil {
		return err
	}
	l.lines++
	if len(l.buf) >= lineBuffer {
		return l.flush()
	}
	return nil
}

// flush writes the buffer out, once guard allows it when it holds lines
// of the session under way.
func (l *lineWriter) flush() error {
	if l.lines > 0 && l.guard != nil {
		if err := l.guard(); err != nil {
			return err
		}
	}
	if len(l.buf) > 0 {
		if _, err := l.w.Write(l.buf); err != nil {
			return err
		}
	}
	l.buf, l.mark = l.buf[:0], 0
	l.out += l.lines
	l.lines = 0
	return nil
}

// begin starts a session, its writes out guarded by guard.
func (l *lineWriter) begin(guard func() error) {
	l.mark, l.guard, l.lines, l.out = len(l.buf), guard, 0, 0
}

// end ends the session: its lines in the buffer kept, or dropped.
func (l *lineWriter) end(keep bool) {
	if !keep {
		l.buf = l.buf[:l.mark]
	}
	l.guard, l.lines = nil, 0
}

// ExportOTLP sends every ended turn of the sessions ids to exp, the
// OTLP/HTTP collector at endpoint, as an OpenTelemetry trace (DESIGN.md
// section 15, package otelexport). Ids are derived from the events, so
// running it again sends the same spans, with the same ids. Each session
// is read twice (storeExport), the second read sending its turns as it
// reads them (otelexport.Sender); the sessions left out, and those that
// end the export, are Export's: of a session erased during its export,
// the spans sent before the export learned it stay sent, and no request
// holding any of its spans goes after that (guardedExporter asks before
// each).
func ExportOTLP(ctx context.Context, st *logstore.Store, ids []string, listed bool, exp sdktrace.SpanExporter, endpoint string, stderr io.Writer) error {
	x := &storeExport{ctx: ctx, st: st, listed: listed, say: "session %[1]s is %[3]s, not exported: %[2]v\n", exportTally: exportTally{stderr: stderr}}
	defer x.watch()()
	return exportOTLP(ctx, x, &x.exportTally, ids, exp, endpoint)
}

// storeExport is what Export and ExportOTLP share: the sessions read
// from the store, and those left out.
type storeExport struct {
	ctx    context.Context
	st     *logstore.Store
	listed bool   // the ids are every session the store listed
	say    string // a session skipped (firstRead)
	exportTally

	// The erasure records the export has seen (watch), and the read
	// under way, which one of its session ends.
	mu      sync.Mutex
	seen    map[string]bool
	reading string
	stop    context.CancelCauseFunc
}

// watch follows the erasure records (logstore.WatchErasureRecords) until
// the function it returns is called: one of the session under way ends
// its read at once (errErased), where a read that reached the erase's
// deletions would wait for the store's stall bound, several times, before
// it failed. A watch that cannot start (no bucket yet, no permission)
// leaves the reads to find the erase by themselves.
func (x *storeExport) watch() func() {
	ctx, cancel := context.WithCancel(x.ctx)
	x.seen = map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = x.st.WatchErasureRecords(ctx, nil, func(e logstore.Erasure) {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.seen[e.SessionID] = true
			if e.SessionID == x.reading && x.stop != nil {
				x.stop(errErased)
			}
		})
	}()
	return func() {
		cancel()
		<-done
	}
}

func (x *storeExport) read(id string, fn func(json.RawMessage, *schema.Envelope) error) error {
	ctx, stop := context.WithCancelCause(x.ctx)
	x.mu.Lock()
	x.reading, x.stop = id, stop
	if x.seen[id] {
		stop(errErased)
	}
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.reading, x.stop = "", nil
		x.mu.Unlock()
		stop(nil)
	}()
	return twice(id, x.storeRead(ctx, id), fn)
}

// erased says whether session id has an erasure record.
func (x *storeExport) erased(id string) bool {
	er, _, err := x.st.ErasureOf(x.ctx, id)
	return err == nil && er != nil
}

// refusals is sre.Missing's word for an erased session without events:
// erased since the list when the ids were listed.
func (x *storeExport) refusals() (bool, error) { return x.listed, sre.ErrErased }

// unreadable says a session whose first read met a read problem with say
// (its arguments the id, the *sre.ReadProblem and its Kind).
func (x *storeExport) unreadable(id string, err error) (string, bool) {
	var rp *sre.ReadProblem
	if !errors.As(err, &rp) {
		return "", false
	}
	return fmt.Sprintf(x.say, id, rp, rp.Kind), true
}

// storeRead is twice's reader of session id from the store, judged
// (sre.ReadValid): to its end the first time, to the first read's last
// seq the second (the events appended since are not the session the
// first read judged), with ctx, which the export's watch of the erasure
// records ends when the session is erased (errErased, or sre.Missing's
// error before the first read gave any of it). A session without events
// is sre.Missing's error; a second read that fails or ends short of the
// first's last seq, of a session erased since, is sre.Missing's error too
// (it says erased).
func (x *storeExport) storeRead(ctx context.Context, id string) func(*readDigest, func(json.RawMessage, *schema.Envelope) error) error {
	return func(first *readDigest, fn func(json.RawMessage, *schema.Envelope) error) error {
		var last uint64
		tail, err := sre.ReadValid(ctx, x.st, id, func(m *logstore.Msg, e *schema.Envelope) error {
			if ctx.Err() != nil {
				// The read gives what it fetched before: give fn
				// none of it.
				return context.Cause(ctx)
			}
			if first != nil && e.Seq > first.last {
				return logstore.ErrStop
			}
			last = e.Seq
			return fn(m.Data, e)
		})
		if err != nil && context.Cause(ctx) == errErased {
			if first == nil && last == 0 {
				// Erased before its read found any of it: as a
				// session without events.
				return sre.Missing(x.ctx, x.st, id)
			}
			return errErased
		}
		if err == nil && !tail.Exists() {
			return sre.Missing(x.ctx, x.st, id)
		}
		if first != nil && (err != nil || last < first.last) {
			if er, _, gerr := x.st.ErasureOf(x.ctx, id); gerr == nil && er != nil {
				return sre.Missing(x.ctx, x.st, id)
			}
		}
		return err
	}
}

// exportOTLP is ExportOTLP and ExportOTLPRead: the sessions ids read by
// x, their spans sent to exp, one otelexport.Sender a session, through a
// guardedExporter; it counts the turns and spans sent.
func exportOTLP(ctx context.Context, x sessionReader, t *exportTally, ids []string, exp sdktrace.SpanExporter, endpoint string) error {
	var turns, spans int
	for _, id := range ids {
		g := &guardedExporter{SpanExporter: exp, guard: guard(x, id)}
		snd := otelexport.NewSender(ctx, g)
		ok, err := exportSession(t, x, id, sessionOut{
			add:  func(_ json.RawMessage, e *schema.Envelope) error { return snd.Add(e) },
			done: snd.Close,
			sent: func() int { return g.sent },
			unit: "spans",
		})
		if err != nil {
			return err
		}
		if ok {
			turns += snd.Turns
			spans += snd.Spans
		}
	}
	fmt.Fprintf(t.stderr, "exported %d sessions: %d turns, %d spans to %s%s\n", t.exported, turns, spans, endpoint, t.leftOut())
	return t.failed()
}

// guardedExporter is the exporter of one session's spans: before each
// request, guard (the session's erasure check) may stop it, so that no
// span of a session goes out once the export knows it was erased.
type guardedExporter struct {
	sdktrace.SpanExporter
	guard func() error
	sent  int // the spans sent
}

func (g *guardedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := g.guard(); err != nil {
		return err
	}
	if err := g.SpanExporter.ExportSpans(ctx, spans); err != nil {
		return err
	}
	g.sent += len(spans)
	return nil
}
