package main

import (
	"context"
	"flag"
	"io"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/repairer"
)

const defaultRepairerHTTP = "127.0.0.1:8083"

func runRepairer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("repairer")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	httpListen := fs.String("http-listen", defaultRepairerHTTP, "HTTP listen address for /healthz /readyz /metrics")
	replicas := fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them")
	noProvision := fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)")
	cfg := repairerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if cfg.LeaseTTL <= 0 || cfg.Grace < 0 {
		return usageErrorf("--lease-ttl must be > 0 and --grace >= 0")
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
	nc, err := nf.connect(repairer.ServiceName)
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := openStore(ctx, nc, logstore.Config{Replicas: *replicas, LeaseTTL: cfg.LeaseTTL, NoProvision: *noProvision,
		Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	o := newOps()
	svc, err := assemble.NewRepairer(*cfg, store, assemble.Deps{Logger: log.With("service", "repairer"), Registerer: o.Registry})
	if err != nil {
		return err
	}
	o.AddReady("nats", natsReady(nc))
	o.AddReady("repairer", svc.Ready)
	var g run.Group
	exec, interrupt := serviceActor(ctx, svc.Run)
	g.Add(exec, interrupt)
	serveOps(&g, ln, o.Mux, log)
	return runGroup(ctx, &g, log)
}

// repairerFlags binds the repairer's settings to fs, defaulting to
// assemble.DefaultRepairer: the values `up` runs the repairer with (up
// has --lease-ttl and --grace of its own).
func repairerFlags(fs *flag.FlagSet) *assemble.Repairer {
	cfg := assemble.DefaultRepairer()
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "the lease TTL holders' leases are written with")
	fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "how long a lease must have expired before the session is repaired")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often every claimed session is checked (besides the lease watch)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "sessions evaluated and repaired at once")
	fs.BoolVar(&cfg.KeepApprovalsPending, "keep-approvals-pending", cfg.KeepApprovalsPending, "leave pending approvals open instead of expiring them (their turn stays open)")
	return &cfg
}
