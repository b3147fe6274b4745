package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/forker"
)

const defaultForkerHTTP = "127.0.0.1:8084"

func runForker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("forker")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	httpListen := fs.String("http-listen", defaultForkerHTTP, "HTTP listen address for /healthz /readyz /metrics")
	replicas := fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them")
	noProvision := fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)")
	cfg := forkerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if cfg.BatchSize < 2 || cfg.BatchSize > 1000 || cfg.SweepEvery <= 0 || cfg.StaleAfter <= 0 || cfg.ForkTimeout <= 0 {
		return usageErrorf("--batch-size must be 2..1000 and the durations > 0")
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
	nc, err := nf.connect(forker.ServiceName)
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := openStore(ctx, nc, logstore.Config{Replicas: *replicas, NoProvision: *noProvision,
		Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	o := newOps()
	svc, err := assemble.NewForker(*cfg, store, assemble.Deps{Conn: nc, Logger: log, Registerer: o.Registry})
	if err != nil {
		return err
	}
	o.AddReady("nats", natsReady(nc))
	o.AddReady("forker", svc.Ready)
	var g run.Group
	exec, interrupt := serviceActor(ctx, svc.Run)
	g.Add(exec, interrupt)
	serveOps(&g, ln, o.Mux, log)
	return runGroup(ctx, &g, log)
}

// forkPollEvery is how often `sessionlog fork` reads the child's tail for
// its progress bar.
const forkPollEvery = 200 * time.Millisecond

// forkerFlags binds the forker's settings to fs, defaulting to
// assemble.DefaultForker: the values `up` runs the forker with.
func forkerFlags(fs *flag.FlagSet) *assemble.Forker {
	cfg := assemble.DefaultForker()
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "events per atomic batch of a copy (at most 1000)")
	fs.IntVar(&cfg.MaxConcurrent, "concurrency", cfg.MaxConcurrent, "forks copied at once")
	fs.DurationVar(&cfg.SweepEvery, "sweep-interval", cfg.SweepEvery, "how often copies left behind by a dead forker are looked for")
	fs.DurationVar(&cfg.StaleAfter, "stale-after", cfg.StaleAfter, "a copy whose record was not renewed this long is taken over")
	fs.DurationVar(&cfg.ForkTimeout, "fork-timeout", cfg.ForkTimeout, "bound on one fork request's copy")
	return &cfg
}
