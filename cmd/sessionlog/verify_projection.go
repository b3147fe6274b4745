package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/sre"
)

func runVerifyProjection(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("verify-projection")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.addTimeoutFlag(fs, defaultBulkVerbTimeout)
	dataDir := fs.String("data-dir", filepath.Join(defaultDataDir, "projector"), "the projector's store directory (stop the projector first: Pebble allows one process per store)")
	tmp := fs.String("tmp-dir", "", "where to build the temporary store (default the system temp dir; removed afterwards)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	v, err := nf.openVerb(ctx, "verify-projection", fs, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	ctx, nc := v.ctx, v.nc
	log := v.log
	defer func() { err = natsconn.VerbError(ctx, err) }()
	store, err := openStore(ctx, nc, logstore.Config{NoProvision: true, Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	return sre.VerifyProjection(ctx, store, *dataDir, *tmp, log, stdout)
}
