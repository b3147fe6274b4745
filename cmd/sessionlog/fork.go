package main

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// defaultForkTimeout bounds `sessionlog fork`: a copy of a long prefix takes
// seconds to minutes; a dead server ends it sooner (natsconn.LostAfter).
const defaultForkTimeout = 10 * time.Minute

func runFork(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("fork")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.addTimeoutFlag(fs, defaultForkTimeout)
	nf.addInboxFlag(fs)
	atSeq := fs.String("at-seq", "", "cut after this seq (it must be a safe point)")
	atTurn := fs.String("at-turn", "", "cut right after this turn's turn/ended")
	child := fs.String("child", "", "the child's session id (default: a new ULID)")
	workspace := fs.String("workspace", "", "shared (default) or isolated: whether the child needs a workspace of its own")
	asJSON := fs.Bool("json", false, "print the reply as JSON (childId, parentId, seedLength, depth) instead of the child id")
	progressFlag := fs.String("progress", "auto", "progress bar on stderr: auto (on a terminal, for prefixes of "+strconv.Itoa(sre.ForkProgressMin)+"+ events), always, never")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("want exactly one parent session id, got %q", fs.Args())
	}
	parent := fs.Arg(0)
	if *atSeq != "" && *atTurn != "" {
		return usageErrorf("--at-seq and --at-turn exclude each other")
	}
	if *progressFlag != "auto" && *progressFlag != "always" && *progressFlag != "never" {
		return usageErrorf("--progress %q: want auto, always or never", *progressFlag)
	}
	req := api.ForkRequest{ParentID: parent, ChildID: *child, Workspace: *workspace}
	if *atSeq != "" {
		n, err := strconv.ParseUint(*atSeq, 10, 64)
		if err != nil || n == 0 {
			return usageErrorf("--at-seq %q: want a seq >= 1", *atSeq)
		}
		req.At = &api.ForkAt{Seq: &n}
	} else if *atTurn != "" {
		req.At = &api.ForkAt{TurnID: *atTurn}
	}
	if req.ChildID == "" {
		// Chosen here rather than by the forker, so the progress bar can
		// follow the child while the request runs.
		req.ChildID = ulid.Make().String()
	}
	if !schema.ValidSessionID(parent) || !schema.ValidSessionID(req.ChildID) {
		return usageErrorf("session ids must match ^[A-Za-z0-9_-]{1,128}$")
	}
	nf.agentInbox()
	v, err := nf.openVerb(ctx, "fork", fs, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	ctx, nc := v.ctx, v.nc
	log := v.log
	defer func() { err = natsconn.VerbError(ctx, err) }()
	if err := nf.CheckInbox(ctx, nc); err != nil {
		return err
	}
	return sre.Fork(ctx, nc, req, *asJSON, *progressFlag, log, stdout, stderr)
}
