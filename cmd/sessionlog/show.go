package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/internal/sre"
)

// `sessionlog show <id>`: a session's folded state and lease.

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("show", stderr)
	asJSON := fs.Bool("json", false, "print the folded state as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := oneID(fs, "show")
	if err != nil {
		return err
	}
	c, err := openSRE(ctx, "show", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	return sre.Show(ctx, c.store, id, *asJSON, stdout)
}
