package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/internal/sre"
)

// `sessionlog replay <id>`: a session's stored events as JSON lines.

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("replay", stderr)
	after := fs.Uint64("after", 0, "print only events with seq > N")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := oneID(fs, "replay")
	if err != nil {
		return err
	}
	c, err := openSRE(ctx, "replay", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	return sre.Replay(ctx, c.store, id, *after, stdout)
}
