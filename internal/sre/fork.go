package sre

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
)

// Fork forks req.ParentID into req.ChildID through the forker (pkg/client)
// and prints the child's id, or the reply as JSON; a progress bar on
// stderr follows the copy (progressFlag: auto, always or never).
func Fork(ctx context.Context, nc *nats.Conn, req api.ForkRequest, asJSON bool, progressFlag string, log *slog.Logger, stdout, stderr io.Writer) (err error) {
	stopBar := func() {}
	// auto draws only on a terminal: a redirected stderr (a log file)
	// gets no carriage returns.
	if progressFlag == "always" || progressFlag == "auto" && progress.IsTerminal(stderr) {
		stopBar = forkProgress(ctx, nc, req, progressFlag == "always", stderr)
	}
	reply, err := client.New(nc).Fork(ctx, req)
	stopBar()
	if err != nil {
		// An unsafe_cut's message names the nearest safe seqs already.
		return err
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(reply); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, reply.ChildID)
	}
	log.Debug("forked", "child", reply.ChildID, "parent", reply.ParentID, "seedLength", reply.SeedLength, "depth", reply.Depth)
	return nil
}

// ForkProgressMin is the prefix length from which `sessionlog fork` shows
// a progress bar: shorter copies take well under a second.
const ForkProgressMin = 3000

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
	if total == 0 || (!always && total < ForkProgressMin) {
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

// forkPollEvery is how often `sessionlog fork` reads the child's tail for
// its progress bar.
const forkPollEvery = 200 * time.Millisecond
