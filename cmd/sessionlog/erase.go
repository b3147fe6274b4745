package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// runErase asks the eraser to erase a session for good (DESIGN.md
// section 14, sessions.api.erase; only the operator's NATS user may).

func runErase(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("erase")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	reason := fs.String("reason", "", "why the session is erased (kept in the audit record; required)")
	by := fs.String("by", "", "who erases it (kept in the audit record; default the NATS user, else $USER)")
	cascade := fs.Bool("cascade", false, "also erase every session forked from it, and their forks; without it forks keep their copies")
	nf.addTimeoutFlag(fs, 0)
	wait := fs.Bool("wait", true, "follow the erase until it is done (its progress bar on a terminal); --wait=false returns once it is accepted, and it goes on by itself")
	progressFlag := fs.String("progress", "auto", "progress bar on stderr while waiting: auto (on a terminal), always, never")
	jsonOut := fs.Bool("json", false, "print the last reply as JSON")
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
	if strings.TrimSpace(*reason) == "" {
		return usageErrorf("--reason is required: it is kept in the audit record")
	}
	if *by == "" {
		*by = nf.User
	}
	if *by == "" {
		*by = os.Getenv("USER")
	}
	if *by == "" {
		*by = "operator"
	}
	if *progressFlag != "auto" && *progressFlag != "always" && *progressFlag != "never" {
		return usageErrorf("--progress %q: want auto, always or never", *progressFlag)
	}
	v, err := nf.openVerb(ctx, "erase", fs, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	ctx, nc := v.ctx, v.nc
	defer func() { err = natsconn.VerbError(ctx, err) }()
	return sre.Erase(ctx, nc, id, *reason, *by, *cascade, *wait, *progressFlag, *jsonOut, stdout, stderr)
}
