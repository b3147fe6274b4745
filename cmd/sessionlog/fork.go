package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// forkProgressMin is the prefix length from which `sessionlog fork` shows
// a progress bar: shorter copies take well under a second.
const forkProgressMin = 3000

// defaultForkTimeout bounds `sessionlog fork`: a copy of a long prefix takes
// seconds to minutes; a dead server ends it sooner (verbLostAfter).
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
	progressFlag := fs.String("progress", "auto", "progress bar on stderr: auto (on a terminal, for prefixes of "+strconv.Itoa(forkProgressMin)+"+ events), always, never")
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
	defer func() { err = verbError(ctx, err) }()
	if err := nf.checkInbox(ctx, nc); err != nil {
		return err
	}

	stopBar := func() {}
	// auto draws only on a terminal: a redirected stderr (a log file)
	// gets no carriage returns.
	if *progressFlag == "always" || *progressFlag == "auto" && progress.IsTerminal(stderr) {
		stopBar = forkProgress(ctx, nc, req, *progressFlag == "always", stderr)
	}
	reply, err := client.New(nc).Fork(ctx, req)
	stopBar()
	if err != nil {
		// An unsafe_cut's message names the nearest safe seqs already.
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(reply); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, reply.ChildID)
	}
	log.Debug("forked", "child", reply.ChildID, "parent", reply.ParentID, "seedLength", reply.SeedLength, "depth", reply.Depth)
	return nil
}

// forkProgress shows how far the child's copy has come by polling its tail
// while the request runs. The total is the cut seq, or the parent's tail
// (the default cut is at most that). It returns a stop function.
func forkProgress(ctx context.Context, nc *nats.Conn, req api.ForkRequest, always bool, w io.Writer) func() {
	st, err := logstore.Open(ctx, nc, logstore.Config{NoProvision: true})
	if err != nil {
		return func() {}
	}
	var total uint64
	if req.At != nil && req.At.Seq != nil {
		total = *req.At.Seq
	} else if t, err := st.Tail(ctx, req.ParentID); err == nil {
		total = t.Seq
	}
	if total == 0 || (!always && total < forkProgressMin) {
		return func() {}
	}
	bar := progress.Events(w, total+1, "fork "+req.ParentID+" -> "+req.ChildID)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(forkPollEvery)
		defer t.Stop()
		for {
			if tail, err := st.Tail(ctx, req.ChildID); err == nil && tail.Seq > 0 {
				_ = bar.Set64(int64(min(tail.Seq, total+1)))
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		_ = bar.Finish()
	}
}
