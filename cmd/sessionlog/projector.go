package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"path/filepath"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gcpolicy"
	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
)

const defaultProjectorHTTP = "127.0.0.1:8080"

const otlpEndpointUsage = "if set, an OTLP/HTTP collector (http://host:4318) each turn is sent to as an OpenTelemetry trace when it ends; a collector that is down never holds the projector back (turns it misses are counted in sessionlog_otlp_turns_dropped_total; sessionlog export --to otlp sends them again)"

// defaultProjectorMemoryLimit is the Go heap's soft limit of a projector
// process when GOMEMLIMIT is not set, and the heap's budget: the projector
// runs its collector when the heap reaches it (gcpolicy.Budget), not
// at five times what is live as GOGC 400 (gcpolicy.DefaultGCPercent) would. bench
// catchup measured the peak RSS of a 200,000-event and a 1,000,000-event
// catch-up three ways:
//   - GOGC 400, no limit (in the bench's process, an earlier stop): 418
//     and 630 MiB, the peak grew with the stream;
//   - GOGC 400, this limit (a projector process): 242-251 and 354-383 MiB
//     (1.41-1.52×), a short catch-up ended before its heap reached the
//     limit, a long one did not;
//   - this budget (a projector process): 361-371 and 393-402 MiB
//     (1.08-1.09×), at a CPU per event within the runs' spread of the
//     above (17.9-19.0 against 16.1-20.3 µs for 1,000,000 events).
//
// Pebble's memtables (32 MiB, at most 4 queued) and block cache (64 MiB)
// are outside the Go heap.
const defaultProjectorMemoryLimit = 320 << 20

func runProjector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newStandalone("projector", defaultProjectorHTTP, stderr)
	c.fs.Lookup("http-listen").Usage = "HTTP listen address: dashboard, /v1 API, /healthz /readyz /metrics"
	token := c.fs.String("http-token", "", "if set, HTTP requests need 'Authorization: Bearer <token>' (in that header only); /healthz, /readyz and the dashboard page (which asks for the token) stay open")
	tenants := tenantTokensFlag(c.fs)
	cfg := projectorFlags(c.fs)
	memLimit := bytesFlag(c.fs, "memory-limit", defaultProjectorMemoryLimit, "soft limit of the Go heap, a `size` such as 320MiB, and its budget: the collector runs when the heap reaches it unless GOGC is set (0: none, GOGC 400; GOMEMLIMIT takes precedence)")
	var svc *projector.Service
	c.handler = func(ops *http.ServeMux) http.Handler {
		ops.Handle("/", svc.APIHandler())
		return httpauth.RequireTenants(*token, tenants, ops)
	}
	return c.run(ctx, args, stderr, "sessionlog-projector", nil, func() error { return nil },
		func(store *logstore.Store, d assemble.Deps) (service, error) {
			gcpolicy.Budget(*memLimit)
			// The projector knows the token too: its own check and the
			// action check (httpauth.Action) take it from the
			// Authorization header only, as the one above does.
			cfg.HTTPToken = *token
			cfg.TenantTokens = tenants
			if err := tenants.check(*token); err != nil {
				return nil, err
			}
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
	fs.IntVar(&cfg.Watch.PageBytes, "watch-page-bytes", cfg.Watch.PageBytes, "durable event bytes one watch (SSE) reads from the log ahead of its client")
	fs.IntVar(&cfg.Watch.MaxTransientBytes, "max-transient-bytes", cfg.Watch.MaxTransientBytes, "larger transient events are dropped (and counted)")
	fs.DurationVar(&cfg.Watch.WriteTimeout, "write-timeout", cfg.Watch.WriteTimeout, "a client that reads nothing of a watch or a streamed answer (/context, /events, /export, ACP) for this long is cut off")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", otlpEndpointUsage)
	return &cfg
}
