package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/internal/sre"
)

// `sessionlog ls`: every session with its last event.

func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("ls", stderr)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	limit := fs.Int("limit", 0, "print at most this many sessions, in id order (0: all); the rest are counted on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usageErrorf("--limit %d: want 0 (all) or more", *limit)
	}
	if fs.NArg() > 0 {
		return usageErrorf("ls takes no arguments")
	}
	c, err := openSRE(ctx, "ls", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	return sre.Ls(ctx, c.store, *asJSON, *limit, stdout, stderr)
}
