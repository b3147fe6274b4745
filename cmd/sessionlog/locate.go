package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/internal/sre"
)

// runLocate prints where a session lives in the store: its stream and
// subject, by the partition count the store recorded. A session with no
// events is not found (exit 1).
func runLocate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, nf := sreFlags("locate", stderr)
	asJSON := fs.Bool("json", false, "print JSON (sessionId, stream, subject, partition, partitions) instead of a line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := oneID(fs, "locate")
	if err != nil {
		return err
	}
	c, err := openSRE(ctx, "locate", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	return sre.Locate(c.ctx, c.store, id, *asJSON, stdout)
}
