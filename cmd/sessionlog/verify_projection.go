package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
)

// errProjectionMismatch makes the command exit non-zero.
var errProjectionMismatch = errors.New("verify-projection: the views differ from a clean rebuild")

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
	defer func() { err = verbError(ctx, err) }()
	store, err := openStore(ctx, nc, logstore.Config{NoProvision: true, Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(*tmp, "sessionlog-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := projector.Verify(ctx, store, *dataDir, filepath.Join(dir, "views"), log)
	if err != nil {
		return err
	}
	for _, p := range res.Checkpoint.Streams {
		fmt.Fprintf(stdout, "stream %s: checkpoint at seq %d\n", p.Name, p.Seq)
	}
	fmt.Fprintf(stdout, "version %s, %d view keys\n", res.Checkpoint.Version, res.Keys)
	fmt.Fprintf(stdout, "checksum: checkpoint %016x, views %016x, clean rebuild %016x\n", res.Stored, res.Scanned, res.Rebuilt)
	if !res.OK() {
		fmt.Fprintln(stdout, "MISMATCH")
		return errProjectionMismatch
	}
	fmt.Fprintln(stdout, "OK")
	return nil
}
