package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// embedded is a benchmark's own single-node stack: a JetStream server with
// its store under dir/nats, a connection to it and the log opened on it.
type embedded struct {
	dir string
	nc  *nats.Conn
	st  *logstore.Store
	// close stops everything, and removes dir when it was made here.
	close func()
}

// startEmbedded starts the stack in dir, or in a new temporary directory
// named after prefix when dir is "".
func startEmbedded(ctx context.Context, dir, prefix string, logger *slog.Logger) (*embedded, error) {
	var cleanup []func()
	undo := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	if dir == "" {
		d, err := os.MkdirTemp("", prefix)
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(d) })
		dir = d
	}
	srv, err := natstest.Start(natstest.Options(filepath.Join(dir, "nats")))
	if err != nil {
		undo()
		return nil, err
	}
	cleanup = append(cleanup, func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		undo()
		return nil, err
	}
	cleanup = append(cleanup, nc.Close)
	st, err := logstore.Open(ctx, nc, logstore.Config{Logger: logger})
	if err != nil {
		undo()
		return nil, err
	}
	return &embedded{dir: dir, nc: nc, st: st, close: undo}, nil
}
