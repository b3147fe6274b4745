package sre

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
)

// VerifyProjection rebuilds the projector's views at dataDir from the
// log in a temporary store under tmp and compares them with the stored
// ones; it returns ErrProjectionMismatch when they differ.
func VerifyProjection(ctx context.Context, store *logstore.Store, dataDir, tmp string, log *slog.Logger, stdout io.Writer) (err error) {
	dir, err := os.MkdirTemp(tmp, "sessionlog-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := projector.Verify(ctx, store, dataDir, filepath.Join(dir, "views"), log)
	if err != nil {
		return err
	}
	for _, p := range res.Checkpoint.Streams {
		fmt.Fprintf(stdout, "stream %s: checkpoint at seq %d\n", p.Name, p.Seq)
	}
	fmt.Fprintf(stdout, "version %s, %d view keys\n", res.Checkpoint.Version, res.Keys)
	fmt.Fprintf(stdout, "checksum: checkpoint %016x, views %016x, clean rebuild %016x\n", res.Stored, res.Scanned, res.Rebuilt)
	if !res.OK() {
		fmt.Fprintln(stdout, "MISMATCH")
		return ErrProjectionMismatch
	}
	fmt.Fprintln(stdout, "OK")
	return nil
}

// ErrProjectionMismatch: the views differ from a clean rebuild (the
// command exits non-zero).
var ErrProjectionMismatch = errors.New("verify-projection: the views differ from a clean rebuild")
