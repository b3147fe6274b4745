package main

import (
	"context"
	"io"
	"time"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/repairer"
)

const defaultRepairerHTTP = "127.0.0.1:8083"

// repairerFlags are the repairer's own flags, shared with up where they fit.
type repairerFlags struct {
	leaseTTL, grace, sweep time.Duration
	concurrency            int
	keepApprovals          bool
}

func runRepairer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("repairer")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	var f repairerFlags
	httpListen := fs.String("http-listen", defaultRepairerHTTP, "HTTP listen address for /healthz /readyz /metrics")
	replicas := fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them")
	noProvision := fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", logstore.DefaultLeaseTTL, "the lease TTL holders' leases are written with")
	fs.DurationVar(&f.grace, "grace", repairer.DefaultGrace, "how long a lease must have expired before the session is repaired")
	fs.DurationVar(&f.sweep, "sweep-interval", repairer.DefaultSweepInterval, "how often every claimed session is checked (besides the lease watch)")
	fs.IntVar(&f.concurrency, "concurrency", repairer.DefaultConcurrency, "sessions evaluated and repaired at once")
	fs.BoolVar(&f.keepApprovals, "keep-approvals-pending", false, "leave pending approvals open instead of expiring them (their turn stays open)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if f.leaseTTL <= 0 || f.grace < 0 {
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
	store, err := openStore(ctx, nc, logstore.Config{Replicas: *replicas, LeaseTTL: f.leaseTTL, NoProvision: *noProvision,
		Logger: log.With("component", "logstore")})
	if err != nil {
		return err
	}
	o := newOps()
	svc, err := repairer.New(repairer.Config{
		Store: store, Logger: log.With("service", "repairer"), Registerer: o.Registry,
		LeaseTTL: f.leaseTTL, Grace: f.grace, SweepInterval: f.sweep, Concurrency: f.concurrency,
		KeepApprovalsPending: f.keepApprovals,
	})
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
