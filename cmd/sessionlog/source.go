package main

import (
	"context"
	"flag"
	"io"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gcpolicy"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/source"
)

const defaultSourceHTTP = "127.0.0.1:8085"

// defaultSourceMemoryLimit is the Go heap's soft limit of a source process
// when GOMEMLIMIT is not set: what it holds is bounded (the mapping states
// kept, two transcripts read to be mapped again, --max-concurrent
// requests); it is the writer's, which served the endpoints before.
const defaultSourceMemoryLimit = 256 << 20

func runSource(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("source", defaultSourceHTTP, stderr)
	cfg := sourceFlags(c.fs)
	memLimit := memoryLimitFlag(c.fs, defaultSourceMemoryLimit)
	return c.run(ctx, args, stderr, source.ServiceName, nil, func() error { return nil }, func(store *logstore.Store, d assemble.Deps) (service, error) {
		gcpolicy.Limit(*memLimit)
		return assemble.NewSource(*cfg, store, d)
	})
}

// sourceFlags binds the source service's settings to fs, defaulting to
// assemble.DefaultSource: the values `up` runs it with.
func sourceFlags(fs *flag.FlagSet) *assemble.Source {
	cfg := assemble.DefaultSource()
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "requests handled at once")
	return &cfg
}
