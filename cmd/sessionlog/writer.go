package main

import (
	"context"
	"flag"
	"io"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
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
	cfg := writerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *replicas < 1 || cfg.LeaseTTL <= 0 {
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
	store, err := openStore(ctx, nc, logstore.Config{Replicas: *replicas, NoProvision: *noProvision, LeaseTTL: cfg.LeaseTTL,
		Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	o := newOps()
	svc, err := assemble.NewWriter(*cfg, store, assemble.Deps{Logger: log, Registerer: o.Registry})
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

// writerFlags binds the writer's settings to fs, defaulting to
// assemble.DefaultWriter: the values `up` runs the writer with.
func writerFlags(fs *flag.FlagSet) *assemble.Writer {
	cfg := assemble.DefaultWriter()
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "session lease TTL (per-key TTL of SESSION_LEASES)")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "requests handled at once")
	fs.IntVar(&cfg.StateCacheSize, "state-cache", cfg.StateCacheSize, "sessions whose folded state is cached")
	return &cfg
}
