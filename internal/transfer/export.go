package transfer

import (
	"bufio"
	"bytes"
	"context"
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
// order. A session is written whole or not at all: one that cannot be
// read to its end is skipped, said on stderr, and named in the error.
func Export(ctx context.Context, st *logstore.Store, ids []string, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 1<<20)
	var sessions, events int
	var skipped []string
	var buf bytes.Buffer
	for _, id := range ids {
		// A session is written whole or not at all: one that cannot be
		// read to its end is skipped (an import of its valid prefix would
		// pass for the whole session).
		buf.Reset()
		n := 0
		tail, err := sre.ReadValid(ctx, st, id, func(m *logstore.Msg, _ *schema.Envelope) error {
			n++
			return sre.WriteLine(&buf, m.Data)
		})
		var rp *sre.ReadProblem
		if errors.As(err, &rp) {
			fmt.Fprintf(stderr, "not exported: %v\n", rp)
			skipped = append(skipped, id)
			continue
		}
		if err != nil {
			return err
		}
		if !tail.Exists() {
			return sre.Missing(ctx, st, id)
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		sessions++
		events += n
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d sessions, %d events\n", sessions, events)
	return notExported(skipped)
}

// ExportOTLP sends every ended turn of the sessions ids to exp, the
// OTLP/HTTP collector at endpoint, as an OpenTelemetry trace (DESIGN.md
// section 15, package otelexport). Ids are derived from the events, so
// running it again sends the same spans, with the same ids. A session
// that cannot be read to its end sends nothing, and is named at the end.
func ExportOTLP(ctx context.Context, st *logstore.Store, ids []string, exp sdktrace.SpanExporter, endpoint string, stderr io.Writer) error {
	var sessions, turns, spans int
	var skipped []string
	for _, id := range ids {
		// A first read checks the whole session, so one that cannot be
		// read to its end sends nothing; the second sends its turns as
		// they are read (otelexport.Sender), so neither holds the session.
		tail, err := sre.ReadValid(ctx, st, id, func(*logstore.Msg, *schema.Envelope) error { return nil })
		var rp *sre.ReadProblem
		if errors.As(err, &rp) {
			fmt.Fprintf(stderr, "session %s is %s, not exported: %v\n", id, rp.Kind, rp)
			skipped = append(skipped, id)
			continue
		}
		if err != nil {
			return err
		}
		if !tail.Exists() {
			return sre.Missing(ctx, st, id)
		}
		snd := otelexport.NewSender(ctx, exp)
		if _, err := sre.ReadValid(ctx, st, id, func(_ *logstore.Msg, e *schema.Envelope) error { return snd.Add(e) }); err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		if err := snd.Close(); err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		sessions++
		turns += snd.Turns
		spans += snd.Spans
	}
	fmt.Fprintf(stderr, "exported %d sessions: %d turns, %d spans to %s\n", sessions, turns, spans, endpoint)
	return notExported(skipped)
}
