package main

import (
	"context"
	"io"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/writer"
)

const defaultWriterHTTP = "127.0.0.1:8081"

func runWriter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("writer")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	httpListen := fs.String("http-listen", defaultWriterHTTP, "HTTP listen address for /healthz /readyz /metrics")
	replicas := fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them (3 in a cluster)")
	noProvision := fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)")
	leaseTTL := fs.Duration("lease-ttl", logstore.DefaultLeaseTTL, "session lease TTL (per-key TTL of SESSION_LEASES)")
	maxConc := fs.Int("max-concurrent", 0, "requests handled at once (0: the writer's default)")
	cacheSize := fs.Int("state-cache", 0, "sessions whose folded state is cached (0: the writer's default)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *replicas < 1 || *leaseTTL <= 0 {
		return usageErrorf("--replicas must be >= 1 and --lease-ttl > 0")
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
	nc, err := nf.connect("sessionlog-writer")
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := openStore(ctx, nc, logstore.Config{Replicas: *replicas, NoProvision: *noProvision, LeaseTTL: *leaseTTL,
		Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	o := newOps()
	svc, err := writer.New(writer.Config{
		Store: store, Logger: log, Registerer: o.Registry, LeaseTTL: *leaseTTL,
		MaxConcurrent: *maxConc, StateCacheSize: *cacheSize,
	})
	if err != nil {
		return err
	}
	o.AddReady("nats", natsReady(nc))
	o.AddReady("writer", svc.Ready)
	var g run.Group
	exec, interrupt := serviceActor(ctx, svc.Run)
	g.Add(exec, interrupt)
	serveOps(&g, ln, o.Mux, log)
	return runGroup(ctx, &g, log)
}
