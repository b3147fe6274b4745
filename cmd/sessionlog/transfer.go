package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// export/import move sessions between stacks as JSON lines, one stored
// envelope per line, sessions one after another in seq order.

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("export", stderr)
	only := fs.String("session", "", "export only this session; without it every session. Each session is read twice, a batch or a page at a time (the first read judges it whole, the second writes it as it reads), never held whole: one whose first read finds it unreadable is left out and named (exit 1); one erased during its export (its erasure record written before the export read it to its end) is left out, said on stderr and counted in the summary, no error (but for the session named with --session: exit 1): of its lines only those written out before the export learned the erase stay on stdout, each whole (with --to otlp, no request of its spans goes after the export learned it; those sent before stay sent); one changed between its two reads ends the export with an error naming it, stdout then holding the sessions before it whole and the lines of its own that the second read gave before it failed, each line whole. A user that may not read the log (an agent's) exports every session sessions.api.list gives it, each read through sessions.api.read: one erased since the list is left out and counted, any other refusal ends the export")
	to := fs.String("to", "", "write sessions in another format: an agent's own (claude-code, codex, pi) or otlp (each ended turn as an OpenTelemetry trace to --endpoint); default sessionlog JSONL on stdout")
	endpoint := fs.String("endpoint", "", "with --to otlp: the OTLP/HTTP collector (http://host:4318)")
	outPath := fs.String("o", "", "with --to FORMAT: write to this file instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// A refused subject ends the export at once, with the subject.
	nf.EndOnRefusal = true
	if *to != "" && *to != "otlp" {
		if *endpoint != "" {
			return usageErrorf("--endpoint goes with --to otlp")
		}
		return runExportTo(ctx, fs, nf, *to, *only, *outPath, stdout, stderr)
	}
	if *outPath != "" {
		return usageErrorf("-o goes with --to FORMAT")
	}
	if fs.NArg() > 0 {
		return usageErrorf("export takes no arguments (use --session)")
	}
	if err := checkExportOTLP(*to, *endpoint); err != nil {
		return err
	}
	if *only != "" {
		if err := logstore.ValidateSessionID(*only); err != nil {
			return usageErrorf("%v", err)
		}
	}
	c, err := openSRE(ctx, "export", fs, nf, stderr)
	if errors.Is(err, nats.ErrPermissionViolation) {
		// A user that may not read the log (an agent's): its own
		// sessions through the read API, as the agent names them (the
		// one named, or every one the projector lists for it).
		return runExportRead(ctx, fs, nf, *only, *to, *endpoint, stdout, stderr)
	}
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	var ids []string
	if *only != "" {
		ids = []string{*only}
	} else {
		refs, err := sre.ListSessions(ctx, c.store)
		if err != nil {
			return err
		}
		for _, r := range refs {
			ids = append(ids, r.ID)
		}
	}
	if *to == "otlp" {
		exp, err := openOTLP(ctx, *endpoint)
		if err != nil {
			return err
		}
		defer exp.Shutdown(context.Background())
		return transfer.ExportOTLP(ctx, c.store, ids, *only == "", exp, *endpoint, stderr)
	}
	return transfer.Export(ctx, c.store, ids, *only == "", stdout, stderr)
}

// openOTLP is export --to otlp's exporter to endpoint.
func openOTLP(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error) {
	exp, err := otelexport.NewOTLPHTTP(ctx, endpoint, otelexport.DefaultExportTimeout)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return exp, nil
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("import", stderr)
	file := fs.String("file", "-", "export file to read (- = stdin); a zstd-compressed one (a retention archive, <id>.jsonl.zst) too")
	as := fs.String("as", "", "import under other ids: NEW for a file of one session, or OLD=NEW[,OLD=NEW...] for any file (e.g. an erased session, whose id cannot be used again)")
	batch := fs.Int("batch", transfer.DefaultBatch, "events per atomic append (at most 1000); with --from, fewer when their bytes would take a request over the server's max_payload")
	from := fs.String("from", "", "read an agent's session files (claude-code, ...) from the PATH arguments instead of sessionlog JSONL")
	jobs := fs.Int("jobs", transfer.DefaultJobs, "with --from: appends in flight at once (twice as many files are read at once)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from != "" {
		if *batch < 1 || *batch > schema.MaxBatchEvents {
			return usageErrorf("--batch must be 1..%d", schema.MaxBatchEvents)
		}
		if *jobs < 1 {
			return usageErrorf("--jobs must be >= 1")
		}
		return runImportFrom(ctx, fs, nf, *from, *batch, *jobs, stdout, stderr)
	}
	if fs.NArg() > 0 {
		return usageErrorf("import reads stdin or --file; no arguments")
	}
	if *batch < 1 || *batch > schema.MaxBatchEvents {
		return usageErrorf("--batch must be 1..%d", schema.MaxBatchEvents)
	}
	in := io.Reader(os.Stdin)
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	in, err = transfer.MaybeZstd(in)
	if err != nil {
		return fmt.Errorf("import: nothing written: %w", err)
	}
	sessions, err := transfer.ReadExport(in)
	if err != nil {
		return fmt.Errorf("import: nothing written: %w", err)
	}
	if *as != "" {
		if err := transfer.RenameSessions(sessions, *as); err != nil {
			return usageErrorf("--as: %v", err)
		}
	}
	c, err := openSRE(ctx, "import", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	return transfer.Import(ctx, c.store, sessions, *batch, stdout, stderr)
}
