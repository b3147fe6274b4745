package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
)

const defaultProjectorHTTP = "127.0.0.1:8080"

const otlpEndpointUsage = "if set, an OTLP/HTTP collector (http://host:4318) each turn is sent to as an OpenTelemetry trace when it ends; a collector that is down never holds the projector back (turns it misses are counted in sessionlog_otlp_turns_dropped_total; sessionlog export --to otlp sends them again)"

// defaultProjectorMemoryLimit is the Go heap's soft limit of a projector
// process when GOMEMLIMIT is not set. The binary runs at GOGC 400
// (defaultGCPercent), which lets the heap grow to five times what is
// live: during a catch-up that is the batches (a few MiB each), the
// consumer's pages and the garbage of folding, and bench catchup measured
// its peak RSS at 418 MiB for 200,000 events and 630 MiB for 1,000,000
// (a larger stream's server state and caches count five times too). With
// this limit the collector stays as lazy as GOGC 400 while the heap is
// small and works harder only near the limit: the peak no longer follows
// the stream's length. Pebble's memtables (32 MiB, at most 4 queued) and
// block cache (64 MiB) are outside the Go heap.
const defaultProjectorMemoryLimit = 320 << 20

// applyMemoryLimit sets the Go heap's soft limit to limit bytes, unless
// GOMEMLIMIT is set (which takes precedence) or limit is 0 (none).
func applyMemoryLimit(limit int64) {
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}

func runProjector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("projector", defaultProjectorHTTP, stderr)
	c.fs.Lookup("http-listen").Usage = "HTTP listen address: dashboard, /v1 API, /healthz /readyz /metrics"
	token := c.fs.String("http-token", "", "if set, HTTP requests need 'Authorization: Bearer <token>' (or ?access_token= / ?token=); /healthz and /readyz stay open")
	cfg := projectorFlags(c.fs)
	memLimit := c.fs.Int64("memory-limit", defaultProjectorMemoryLimit, "soft limit of the Go heap in bytes (0: none; GOMEMLIMIT takes precedence)")
	var svc *projector.Service
	c.handler = func(ops *http.ServeMux) http.Handler {
		ops.Handle("/", svc.APIHandler())
		return httpauth.Require(*token, ops)
	}
	return c.run(ctx, args, stderr, "sessionlog-projector", nil, func() error { return nil },
		func(store *logstore.Store, d assemble.Deps) (service, error) {
			applyMemoryLimit(*memLimit)
			var err error
			svc, err = assemble.NewProjector(*cfg, store, d)
			return svc, err
		})
}

// projectorFlags binds the projector's settings to fs, defaulting to
// assemble.DefaultProjector: the values `up` runs the projector with
// (up's store is in <up's --data-dir>/projector).
func projectorFlags(fs *flag.FlagSet) *assemble.Projector {
	cfg := assemble.DefaultProjector(filepath.Join(defaultDataDir, "projector"))
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the Pebble read-model store (rebuildable from the stream)")
	fs.IntVar(&cfg.MaxBatchEvents, "max-batch-events", cfg.MaxBatchEvents, "events per Pebble batch while catching up")
	fs.IntVar(&cfg.CacheSessions, "state-cache", cfg.CacheSessions, "sessions whose fold state is kept in memory")
	fs.IntVar(&cfg.Watch.QueueBytes, "watch-queue-bytes", cfg.Watch.QueueBytes, "transient event bytes one watch (SSE) may hold for a client that does not read; past it the watch ends with slow_consumer")
	fs.IntVar(&cfg.Watch.TotalBytes, "watch-total-bytes", cfg.Watch.TotalBytes, "transient event bytes all watches together may hold")
	fs.IntVar(&cfg.Watch.MaxTransientBytes, "max-transient-bytes", cfg.Watch.MaxTransientBytes, "larger transient events are dropped (and counted)")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", otlpEndpointUsage)
	return &cfg
}
