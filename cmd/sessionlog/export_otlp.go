package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog export --to otlp --endpoint URL [--session ID]` sends every
// ended turn of the sessions as an OpenTelemetry trace (DESIGN.md section
// 15, package otelexport). Ids are derived from the events, so running it
// again sends the same spans, with the same ids.

func checkExportOTLP(to, endpoint string) error {
	switch {
	case to == "" && endpoint != "":
		return usageErrorf("--endpoint goes with --to otlp")
	case to == "otlp" && endpoint == "":
		return usageErrorf("--to otlp needs --endpoint (the OTLP/HTTP collector, http://host:4318)")
	}
	return nil
}

func exportOTLP(ctx context.Context, st *logstore.Store, ids []string, endpoint string, stderr io.Writer) error {
	exp, err := otelexport.NewOTLPHTTP(ctx, endpoint, otelexport.DefaultExportTimeout)
	if err != nil {
		return usageErrorf("%v", err)
	}
	defer exp.Shutdown(context.Background())
	var sessions, turns, spans int
	var skipped []string
	for _, id := range ids {
		// A first read checks the whole session, so one that cannot be
		// read to its end sends nothing; the second sends its turns as
		// they are read (otelexport.Sender), so neither holds the session.
		tail, err := readValid(ctx, st, id, func(*logstore.Msg, *schema.Envelope) error { return nil })
		var rp *readProblem
		if errors.As(err, &rp) {
			fmt.Fprintf(stderr, "session %s is %s, not exported: %v\n", id, rp.kind, rp)
			skipped = append(skipped, id)
			continue
		}
		if err != nil {
			return err
		}
		if !tail.Exists() {
			return missing(ctx, st, id)
		}
		snd := otelexport.NewSender(ctx, exp)
		if _, err := readValid(ctx, st, id, func(_ *logstore.Msg, e *schema.Envelope) error { return snd.Add(e) }); err != nil {
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
	if len(skipped) > 0 {
		return fmt.Errorf("%d sessions not exported (unreadable or with a gap): %s", len(skipped), strings.Join(skipped, ", "))
	}
	return nil
}
