package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
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
	if err := nf.CheckInbox(v.ctx, v.nc); err != nil {
		v.close()
		if errors.Is(err, client.ErrInboxRefused) {
			// What to set, rather than the refusal alone (which may
			// have ended the context too: EndOnRefusal).
			return nil, err
		}
		return nil, natsconn.VerbError(v.ctx, err)
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

// runImportFrom is `import --from FORMAT PATH...`.
func runImportFrom(ctx context.Context, fs *flag.FlagSet, nf *natsFlags, from string, batch, jobs int, stdout, stderr io.Writer) (err error) {
	f, err := lookupFormat(from)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("import --from %s needs files or directories", from)
	}
	files, err := transfer.SessionFiles(f, fs.Args())
	if err != nil {
		return usageErrorf("%v", err)
	}
	v, err := openAgentVerb(ctx, "import", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	defer func() { err = natsconn.VerbError(v.ctx, err) }()
	return transfer.ImportFrom(v.ctx, v.cl, f, files, batch, jobs, stdout, stderr)
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
	defer func() { err = natsconn.VerbError(v.ctx, err) }()
	return transfer.ExportTo(v.ctx, v.cl, f, id, outPath, stdout, stderr)
}

// runExportRead is `export [--session ID] [--to otlp]` by a user that
// may not read the log (an agent's): the session named, or every session
// the projector lists for the user (sessions.api.list: its own and those
// granted to it), read through sessions.api.read; as JSON lines, the
// stored envelopes, or to an OTLP collector.
func runExportRead(ctx context.Context, fs *flag.FlagSet, nf *natsFlags, id, to, endpoint string, stdout, stderr io.Writer) (err error) {
	v, err := openAgentVerb(ctx, "export", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	defer func() { err = natsconn.VerbError(v.ctx, err) }()
	ids := []string{id}
	if id == "" {
		listed, err := v.cl.ListAll(v.ctx)
		if err != nil {
			return fmt.Errorf("list the sessions this user may read: %w", err)
		}
		ids = ids[:0]
		for _, s := range listed {
			ids = append(ids, s.SessionID)
		}
	}
	if to == "otlp" {
		exp, err := openOTLP(v.ctx, endpoint)
		if err != nil {
			return err
		}
		defer exp.Shutdown(context.Background())
		return transfer.ExportOTLPRead(v.ctx, v.cl, ids, id == "", exp, endpoint, stderr)
	}
	return transfer.ExportRead(v.ctx, v.cl, ids, id == "", stdout, stderr)
}
