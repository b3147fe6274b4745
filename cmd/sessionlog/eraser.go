package main

import (
	"context"
	"flag"
	"io"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/eraser"
)

const defaultEraserHTTP = "127.0.0.1:8086"

func runEraser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("eraser", defaultEraserHTTP, stderr)
	cfg := eraserFlags(c.fs)
	return c.run(ctx, args, stderr, eraser.ServiceName, nil, func() error {
		if cfg.RetainClosed < 0 {
			return usageErrorf("--retain-closed must be >= 0")
		}
		return nil
	}, func(store *logstore.Store, d assemble.Deps) (service, error) {
		return assemble.NewEraser(*cfg, store, d)
	})
}

// eraserFlags binds the eraser's settings to fs, defaulting to
// assemble.DefaultEraser: the values `up` runs the eraser with (up has
// --retain-closed and --archive-dir of its own).
func eraserFlags(fs *flag.FlagSet) *assemble.Eraser {
	cfg := assemble.DefaultEraser()
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often unfinished erase jobs are started again (and retention runs, when shorter than --retain-closed)")
	fs.DurationVar(&cfg.RetainClosed, "retain-closed", cfg.RetainClosed, "erase sessions closed for longer than this (0: keep them forever), after archiving them to --archive-dir when given")
	fs.StringVar(&cfg.ArchiveDir, "archive-dir", cfg.ArchiveDir, "where --retain-closed writes each session before erasing it (<id>.jsonl.zst, the export format; sessionlog import reads it)")
	return &cfg
}
