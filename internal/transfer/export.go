package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
// error. A session whose second read fails or gives other events than the
// first (erased or changed between the two) ends the export, after the
// lines of its second read written so far (each line whole), all of which
// end up on stdout.
func Export(ctx context.Context, st *logstore.Store, ids []string, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 1<<20)
	x := storeExport{ctx: ctx, st: st, exportTally: exportTally{stderr: stderr}}
	var events int
	for _, id := range ids {
		_, err := x.session(id, "not exported: %[2]v\n", func(raw json.RawMessage, _ *schema.Envelope) error {
			events++
			return sre.WriteLine(w, raw)
		})
		if err != nil {
			return errors.Join(err, w.Flush())
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d sessions, %d events\n", x.exported, events)
	return notExported(x.skipped)
}

// ExportOTLP sends every ended turn of the sessions ids to exp, the
// OTLP/HTTP collector at endpoint, as an OpenTelemetry trace (DESIGN.md
// section 15, package otelexport). Ids are derived from the events, so
// running it again sends the same spans, with the same ids. Each session
// is read twice (storeExport), the second read sending its turns as it
// reads them (otelexport.Sender); the sessions left out, and those that
// end the export, are Export's.
func ExportOTLP(ctx context.Context, st *logstore.Store, ids []string, exp sdktrace.SpanExporter, endpoint string, stderr io.Writer) error {
	x := storeExport{ctx: ctx, st: st, exportTally: exportTally{stderr: stderr}}
	turns, spans, err := sendOTLP(ctx, ids, exp, func(id string, fn func(json.RawMessage, *schema.Envelope) error) (bool, error) {
		return x.session(id, "session %[1]s is %[3]s, not exported: %[2]v\n", fn)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d sessions: %d turns, %d spans to %s\n", x.exported, turns, spans, endpoint)
	return notExported(x.skipped)
}

// storeExport is what Export and ExportOTLP share: the sessions exported,
// and those left out.
type storeExport struct {
	ctx context.Context
	st  *logstore.Store
	exportTally
}

// session gives fn the events of session id, read twice from the store
// (twice, over storeRead), and says whether it did. A session whose
// first read meets a read problem is left out, said on stderr with say
// (its arguments: the id, the *sre.ReadProblem and its Kind) and named
// in the error, and is no error here; fn was then given none of it.
func (x *storeExport) session(id, say string, fn func(json.RawMessage, *schema.Envelope) error) (bool, error) {
	return x.tally(twice(id, x.storeRead(id), fn), func(err error) bool {
		var rp *sre.ReadProblem
		if !errors.As(err, &rp) {
			return false
		}
		fmt.Fprintf(x.stderr, say, id, rp, rp.Kind)
		x.skipped = append(x.skipped, id)
		return true
	})
}

// storeRead is twice's reader of session id from the store, judged
// (sre.ReadValid): to its end the first time, to the first read's last
// seq the second (the events appended since are not the session the
// first read judged). A session without events is sre.Missing's error; a
// second read that fails or ends short of the first's last seq, of a
// session erased since, is sre.Missing's error too (it says erased).
func (x *storeExport) storeRead(id string) func(*readDigest, func(json.RawMessage, *schema.Envelope) error) error {
	return func(first *readDigest, fn func(json.RawMessage, *schema.Envelope) error) error {
		var last uint64
		tail, err := sre.ReadValid(x.ctx, x.st, id, func(m *logstore.Msg, e *schema.Envelope) error {
			if first != nil && e.Seq > first.last {
				return logstore.ErrStop
			}
			last = e.Seq
			return fn(m.Data, e)
		})
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

// sendOTLP sends the spans of each session to exp, its events given by
// session (false: left out), one otelexport.Sender a session; it counts
// the turns and spans sent. ExportOTLP and ExportOTLPRead send through it.
func sendOTLP(ctx context.Context, ids []string, exp sdktrace.SpanExporter, session func(id string, fn func(json.RawMessage, *schema.Envelope) error) (bool, error)) (turns, spans int, err error) {
	for _, id := range ids {
		snd := otelexport.NewSender(ctx, exp)
		ok, err := session(id, func(_ json.RawMessage, e *schema.Envelope) error { return snd.Add(e) })
		if err != nil {
			return turns, spans, err
		}
		if !ok {
			continue
		}
		if err := snd.Close(); err != nil {
			return turns, spans, fmt.Errorf("session %s: %w", id, err)
		}
		turns += snd.Turns
		spans += snd.Spans
	}
	return turns, spans, nil
}
