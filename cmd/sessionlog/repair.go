package main

import (
	"context"
	"io"
	"time"

	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

func runRepair(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("repair")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	force := fs.Bool("force", false, "repair even if a holder's lease is live (the holder's next append is refused: paused)")
	nf.addTimeoutFlag(fs, 30*time.Second)
	jsonOut := fs.Bool("json", false, "print the reply as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("want exactly one session id, got %d arguments", fs.NArg())
	}
	id := fs.Arg(0)
	if !schema.ValidSessionID(id) {
		return usageErrorf("session id %q must match ^[A-Za-z0-9_-]{1,128}$", id)
	}
	v, err := nf.openVerb(ctx, "repair", fs, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	ctx, nc := v.ctx, v.nc
	defer func() { err = natsconn.VerbError(ctx, err) }()
	return sre.Repair(ctx, nc, id, *force, *jsonOut, stdout)
}
