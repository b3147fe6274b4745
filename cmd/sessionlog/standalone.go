package main

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/oklog/run"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/opshttp"
)

// standalone is what the service commands share: the
// flags of a service run alone against --nats-url, and the wiring that
// runs it (connect as a service, open the store, serve /healthz /readyz
// /metrics, an actor group ended by a signal).
type standalone struct {
	name       string
	fs         *flag.FlagSet
	nf         *natsFlags
	httpListen *string
	// metricsListen, when set, is a second listener with /healthz /readyz
	// /metrics alone and no token.
	metricsListen *string
	replicas      *int
	partitions    *int
	noProvision   *bool
	sealBodies    *bool
	// handler, when set, makes what the HTTP listener serves from the ops
	// mux (/healthz /readyz /metrics), after the service is built: the
	// projector adds its API and dashboard behind a token.
	handler func(ops *http.ServeMux) http.Handler
}

// service is the part of a service a standalone command runs.
type service interface {
	Run(ctx context.Context) error
	Ready() error
}

func newStandalone(name, defaultHTTP string, stderr io.Writer) *standalone {
	fs := newFlags(name)
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	nf.Inbox = natsauth.ServiceInboxPrefix
	return &standalone{
		name:          name,
		fs:            fs,
		nf:            nf,
		httpListen:    fs.String("http-listen", defaultHTTP, "HTTP listen address for /healthz /readyz /metrics"),
		metricsListen: fs.String("metrics-listen", "", "if set, a second HTTP listen address serving only /healthz /readyz /metrics, never behind --http-token (for a scraper and probes)"),
		replicas:      fs.Int("replicas", 1, "replicas of the stream and buckets if this process creates them (3 in a cluster)"),
		partitions:    partitionsFlag(fs),
		noProvision:   fs.Bool("no-provision", false, "do not create or update the stream and buckets (they must exist)"),
		sealBodies:    sealBodiesFlag(fs),
	}
}

// run parses args, checks them with check (a usage error), connects as
// connName, opens the store with leaseTTL (0: the store's default), builds
// the service and runs it until ctx ends or a signal comes. leaseTTL
// points at the service's own setting (read after parsing), nil for the
// store's default.
func (c *standalone) run(ctx context.Context, args []string, stderr io.Writer, connName string, leaseTTL *time.Duration,
	check func() error, build func(*logstore.Store, assemble.Deps) (service, error)) error {
	if err := parseFlags(c.fs, args); err != nil {
		return err
	}
	if c.fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", c.fs.Args())
	}
	if *c.replicas < 1 {
		return usageErrorf("--replicas must be >= 1")
	}
	if err := checkPartitions(*c.partitions); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	log, err := newLogger(c.fs, stderr)
	if err != nil {
		return err
	}
	c.nf.Log = log
	ln, err := opshttp.Listen(*c.httpListen)
	if err != nil {
		return err
	}
	defer ln.Close()
	var mln net.Listener
	if *c.metricsListen != "" {
		if mln, err = opshttp.Listen(*c.metricsListen); err != nil {
			return err
		}
		defer mln.Close()
	}
	nc, err := c.nf.connect(connName)
	if err != nil {
		return err
	}
	defer nc.Close()
	scfg := logstore.Config{Replicas: *c.replicas, Partitions: *c.partitions, NoProvision: *c.noProvision, SealBodies: *c.sealBodies, Logger: log.With("component", "logstore")}
	if leaseTTL != nil {
		scfg.LeaseTTL = *leaseTTL
	}
	store, err := openStore(ctx, nc, scfg)
	if err != nil {
		return err
	}
	o := opshttp.New()
	svc, err := build(store, assemble.Deps{Conn: nc, Logger: log.With("service", c.name), Registerer: o.Registry})
	if err != nil {
		return err
	}
	o.AddReady("nats", opshttp.NATSReady(nc))
	o.AddReady(c.name, svc.Ready)
	var g run.Group
	exec, interrupt := serviceActor(ctx, svc.Run)
	g.Add(exec, interrupt)
	var h http.Handler = o.Mux
	if c.handler != nil {
		h = c.handler(o.Mux)
	}
	opshttp.Serve(&g, ln, h, log)
	if mln != nil {
		opshttp.Serve(&g, mln, o.MetricsHandler(), log)
	}
	return runGroup(ctx, &g, log)
}
