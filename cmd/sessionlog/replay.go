package main

import (
	"context"
	"errors"
	"io"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/schema"
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
	tail, err := sre.ReadValid(ctx, c.store, id, func(m *logstore.Msg, e *schema.Envelope) error {
		if e.Seq <= *after {
			return nil
		}
		return sre.WriteLine(stdout, m.Data)
	})
	var rp *sre.ReadProblem
	if errors.As(err, &rp) {
		return rp
	}
	if err != nil {
		return err
	}
	if !tail.Exists() {
		return sre.Missing(ctx, c.store, id)
	}
	return nil
}
