package main

import (
	"context"
	"flag"
	"io"
	"path/filepath"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

const defaultProjectorHTTP = "127.0.0.1:8080"

func runProjector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("projector")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	httpListen := fs.String("http-listen", defaultProjectorHTTP, "HTTP listen address: dashboard, /v1 API, /healthz /readyz /metrics")
	token := fs.String("http-token", "", "if set, HTTP requests need 'Authorization: Bearer <token>' (or ?access_token= / ?token=); /healthz and /readyz stay open")
	replicas := fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them (3 in a cluster)")
	noProvision := fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)")
	cfg := projectorFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	log, err := newLogger(fs, stderr)
	if err != nil {
		return err
	}
	nf.Log = log
	ln, err := listen(*httpListen)
	if err != nil {
		return err
	}
	defer ln.Close()
	nc, err := nf.connect("sessionlog-projector")
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := openStore(ctx, nc, logstore.Config{Replicas: *replicas, NoProvision: *noProvision, Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	o := newOps()
	svc, err := assemble.NewProjector(*cfg, store, assemble.Deps{Logger: log, Registerer: o.Registry})
	if err != nil {
		return err
	}
	o.AddReady("nats", natsReady(nc))
	o.AddReady("projector", svc.Ready)
	o.Mux.Handle("/", svc.APIHandler())
	var g run.Group
	exec, interrupt := serviceActor(ctx, svc.Run)
	g.Add(exec, interrupt)
	serveOps(&g, ln, httpauth.Require(*token, o.Mux), log)
	return runGroup(ctx, &g, log)
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
	return &cfg
}
