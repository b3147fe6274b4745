package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
)

const defaultProjectorHTTP = "127.0.0.1:8080"

func runProjector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("projector")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	dataDir := fs.String("data-dir", filepath.Join(defaultDataDir, "projector"), "directory of the Pebble read-model store (rebuildable from the stream)")
	httpListen := fs.String("http-listen", defaultProjectorHTTP, "HTTP listen address: dashboard, /v1 API, /healthz /readyz /metrics")
	token := fs.String("http-token", "", "if set, HTTP requests need 'Authorization: Bearer <token>' (or ?access_token= / ?token=); /healthz and /readyz stay open")
	replicas := fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them (3 in a cluster)")
	noProvision := fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)")
	batch := fs.Int("max-batch-events", 0, "events per Pebble batch while catching up (0: the projector's default)")
	cache := fs.Int("state-cache", 0, "sessions whose fold state is kept in memory (0: the projector's default)")
	var watch projector.WatchLimits
	fs.IntVar(&watch.QueueBytes, "watch-queue-bytes", projector.DefaultWatchQueueBytes, "transient event bytes one watch (SSE) may hold for a client that does not read; past it the watch ends with slow_consumer")
	fs.IntVar(&watch.TotalBytes, "watch-total-bytes", projector.DefaultWatchTotalBytes, "transient event bytes all watches together may hold")
	fs.IntVar(&watch.MaxTransientBytes, "max-transient-bytes", projector.DefaultMaxTransientBytes, "larger transient events are dropped (and counted)")
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
	svc, err := projector.New(projector.Config{
		Store: store, DataDir: *dataDir, Logger: log, Registerer: o.Registry,
		MaxBatchEvents: *batch, CacheSessions: *cache, Watch: watch,
	})
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
