package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/internal/sre"
)

// `sessionlog tail [<id>]`: follow new events live.

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("tail", stderr)
	after := fs.Int64("after", -1, "with a session: also print its stored events with seq > N first (-1: only new ones)")
	noLive := fs.Bool("no-live", false, "do not print transient events (sessions.live.*)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var id string
	switch fs.NArg() {
	case 0:
	case 1:
		var err error
		if id, err = oneID(fs, "tail"); err != nil {
			return err
		}
	default:
		return usageErrorf("usage: sessionlog tail [<sessionId>] [flags]")
	}
	if *after >= 0 && id == "" {
		return usageErrorf("--after needs a session id")
	}
	c, err := openSRE(ctx, "tail", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	ctx, cancel := signalContext(ctx)
	defer cancel()
	return sre.Tail(ctx, c.store, id, *after, *noLive, stdout, stderr)
}
