package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/embednats"
	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/opshttp"
	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/internal/storewatch"
)

// Defaults of `sessionlog up` (DESIGN.md section 10).
const (
	defaultDataDir    = "./data"
	defaultNATSListen = "127.0.0.1:4222"
	defaultHTTPListen = "127.0.0.1:8080"
	// defaultSync: an acknowledged event is on disk (DESIGN.md section 4).
	defaultSync = "always"
)

// upEnv is what an up-service gets to build itself.
type upEnv struct {
	// Ctx lives as long as the process; services get their own cancel via
	// their actor's Interrupt.
	Ctx context.Context
	// NC is the shared in-process connection; Connect opens another one
	// (closed by up after every actor has stopped).
	NC      *nats.Conn
	Connect func(name string) (*nats.Conn, error)
	// ConnectEraser opens a connection as the user that may erase (the
	// eraser's and, as before the eraser was its own service, the
	// repairer's).
	ConnectEraser func(name string) (*nats.Conn, error)
	// NATSURL is where the embedded server listens, for display.
	NATSURL  string
	Store    *logstore.Store
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// Mux is the --http-listen mux: /healthz, /readyz and /metrics are
	// taken; the projector mounts its API and dashboard at "/".
	Mux *http.ServeMux
	// Configs are the services' configurations (upFlags.configs).
	Configs upConfigs
	// AddReady adds a readiness check to /readyz.
	AddReady func(name string, check func() error)
}

// upConfigs are the configurations `up` builds its services from: each
// service's defaults (assemble's Default functions, which read the
// service's DefaultConfig) with up's flags applied.
type upConfigs struct {
	Writer    assemble.Writer
	Source    assemble.Source
	Repairer  assemble.Repairer
	Eraser    assemble.Eraser
	Forker    assemble.Forker
	Projector assemble.Projector
}

// configs are the services' configurations f gives: --lease-ttl is the
// writer's and the repairer's, --grace the repairer's, --retain-closed and
// --archive-dir the eraser's, the projector's store is in
// <--data-dir>/projector and it is given --http-token, --tenant-token and
// --otlp-endpoint.
func (f *upFlags) configs() upConfigs {
	c := upConfigs{Writer: f.writer, Source: assemble.DefaultSource(), Repairer: assemble.DefaultRepairer(),
		Eraser: assemble.DefaultEraser(), Forker: assemble.DefaultForker(), Projector: assemble.DefaultProjector(filepath.Join(f.dataDir, "projector"))}
	c.Writer.LeaseTTL = f.leaseTTL
	c.Repairer.LeaseTTL, c.Repairer.Grace = f.leaseTTL, f.grace
	c.Eraser.RetainClosed, c.Eraser.ArchiveDir = f.retainClosed, f.archiveDir
	// Dashboard actions take the token only from the Authorization header.
	c.Projector.HTTPToken, c.Projector.TenantTokens, c.Projector.OTLPEndpoint = f.httpToken, f.tenantTokens, f.otlpEndpoint
	return c
}

// upActor is a service's place in up's run.Group: Execute blocks until the
// service stops, Interrupt stops exactly that service.
type upActor struct {
	Execute   func() error
	Interrupt func(error)
}

// upService is a service that `sessionlog up` runs; its Start is in
// up_<name>.go.
type upService struct {
	Name  string
	Start func(env *upEnv) (*upActor, error)
}

// upServices are the services of `sessionlog up`, in the order they start:
// the writer first so agents can append as soon as the process is ready.
var upServices = []upService{
	{Name: "writer", Start: startUpWriter},
	{Name: "source", Start: startUpSource},
	{Name: "repairer", Start: startUpRepairer},
	{Name: "eraser", Start: startUpEraser},
	{Name: "forker", Start: startUpForker},
	{Name: "projector", Start: startUpProjector},
}

type upFlags struct {
	dataDir, natsListen, httpListen, sync string
	leaseTTL, grace, retainClosed         time.Duration
	archiveDir                            string
	partitions                            *int
	sealBodies                            *bool
	httpToken, natsConfig                 string
	tenantTokens                          tenantTokens
	natsUser, natsPassword                string
	operatorUser, operatorPassword        string
	otlpEndpoint                          string
	// writer holds the writer's limits per tenant.
	writer assemble.Writer
}

// bindUpFlags binds up's flags to fs; their defaults are the services'.
func bindUpFlags(fs *flag.FlagSet) *upFlags {
	var f upFlags
	eraser := assemble.DefaultEraser()
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir, "data directory (JetStream store in <dir>/nats, service state beside it); survives restarts")
	fs.StringVar(&f.natsListen, "nats-listen", defaultNATSListen, "NATS client listen address (port 0: any free port)")
	fs.StringVar(&f.httpListen, "http-listen", defaultHTTPListen, "HTTP listen address: dashboard, API, /healthz /readyz /metrics")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", assemble.DefaultWriter().LeaseTTL, "session lease TTL")
	fs.DurationVar(&f.grace, "grace", assemble.DefaultRepairer().Grace, "how long a lease must have expired before the repairer closes the session")
	fs.DurationVar(&f.retainClosed, "retain-closed", eraser.RetainClosed, "erase sessions closed for longer than this (0: keep them forever), after archiving them to --archive-dir when given")
	fs.StringVar(&f.archiveDir, "archive-dir", eraser.ArchiveDir, "where --retain-closed writes each session before erasing it (<id>.jsonl.zst; sessionlog import reads it)")
	f.partitions = partitionsFlag(fs)
	f.sealBodies = sealBodiesFlag(fs)
	fs.StringVar(&f.sync, "sync", defaultSync, "JetStream fsync: always (every event is on disk before it is acknowledged; the writer commits the appends of many sessions with one fsync) or interval (fsync every 2m, faster: a machine crash or power loss loses the acknowledged events of the last interval)")
	fs.StringVar(&f.httpToken, "http-token", "", "if set, HTTP requests need 'Authorization: Bearer <token>' (in that header only); /healthz, /readyz and the dashboard page (which asks for the token) stay open")
	f.tenantTokens = tenantTokensFlag(fs)
	fs.StringVar(&f.natsConfig, "nats-config", "", "nats-server configuration file for the embedded server (flags given explicitly override its listen address and store dir)")
	fs.StringVar(&f.natsUser, "nats-user", "", "the agents' NATS user: with --nats-password, clients must log in, and this user gets the agent permissions of deploy/nats/auth.conf (append, heartbeat, read, fork requests, live events; nothing of the log or the JetStream API). Without it NATS is open and listens on loopback only")
	fs.StringVar(&f.natsPassword, "nats-password", "", "the agents' NATS password (with --nats-user)")
	fs.StringVar(&f.operatorUser, "operator-user", "", "an operator's NATS user, with every right (the SRE verbs: repair, fork, erase, ls, replay...); needs --nats-user")
	fs.StringVar(&f.operatorPassword, "operator-password", "", "the operator's NATS password (with --operator-user)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", otlpEndpointUsage)
	f.writer = assemble.DefaultWriter()
	tenantLimitFlags(fs, &f.writer)
	return &f
}

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("up")
	fs.SetOutput(stderr)
	f := bindUpFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if f.sync != "interval" && f.sync != "always" {
		return usageErrorf("--sync %q: want interval or always", f.sync)
	}
	if f.leaseTTL <= 0 || f.grace < 0 {
		return usageErrorf("--lease-ttl must be > 0 and --grace >= 0")
	}
	if err := checkPartitions(*f.partitions); err != nil {
		return err
	}
	if err := f.tenantTokens.check(f.httpToken); err != nil {
		return usageErrorf("%v", err)
	}
	quiet := false
	if progress.IsTerminal(stderr) && !flagGiven(fs, "log-level") {
		// On a terminal the lines that say where things are come first,
		// not after the server's banner and thirty JSON log lines: only
		// warnings and errors are logged unless --log-level asks for more.
		if err := fs.Set("log-level", "warn"); err != nil {
			return err
		}
		quiet = true
	}
	log, err := newLogger(fs, stderr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	opts, svcUser, err := upServerOptions(fs, f)
	if err != nil {
		return err
	}
	if svcUser == nil {
		// Said first, before anything else is printed: anyone who reaches
		// the port may do anything, including delete the log.
		fmt.Fprintf(stdout, "open: NATS needs no credentials: every client on this host may write, read and delete the log (--nats-user/--nats-password give agents a user of their own)\n")
		log.Warn("NATS is open: no --nats-user, listening on loopback only", "nats_listen", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	}
	// Bind HTTP first: a taken port fails before the server or any store opens.
	ln, err := opshttp.Listen(f.httpListen)
	if err != nil {
		return err
	}
	defer ln.Close()

	ns, err := embednats.Start(opts, log.With("component", "nats-server"))
	if err != nil {
		return err
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()

	conns := newUpConns(ns, opts, svcUser, log)
	defer conns.closeAll()
	nc, err := conns.connect("sessionlog-up")
	if err != nil {
		return err
	}
	// A full disk: /readyz says so, appends are refused at once, and
	// JetStream reopens the store once space is freed (internal/storewatch).
	sw := storewatch.New(ns, opts, f.dataDir, log.With("component", "store"))
	store, err := openStore(ctx, nc, logstore.Config{Replicas: 1, Partitions: *f.partitions, LeaseTTL: f.leaseTTL, Logger: log.With("component", "logstore"),
		// On one node that does not fsync per event, an atomic batch costs
		// more than the publishes it gathers (docs/adr/008-group-commit.md).
		NoGroupCommit: !opts.SyncAlways, CannotStore: sw.Err, SealBodies: *f.sealBodies})
	if err != nil {
		return err
	}

	o := opshttp.New()
	o.AddReady("nats", func() error {
		if !ns.JetStreamEnabled() {
			return errors.New("jetstream not enabled")
		}
		return opshttp.NATSReady(nc)()
	})
	o.AddReady("store", sw.Err)
	natsURL := embednats.ClientURL(ns)
	var g run.Group
	{
		// The server itself is shut down after the group, once every service
		// has stopped; this actor only ends the group if it dies.
		stop := make(chan struct{})
		g.Add(func() error {
			dead := make(chan struct{})
			go func() { ns.WaitForShutdown(); close(dead) }()
			select {
			case <-dead:
				return errors.New("embedded nats-server stopped")
			case <-stop:
				return nil
			}
		}, func(error) { close(stop) })
	}
	{
		wctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return sw.Run(wctx) }, func(error) { cancel() })
	}
	for _, svc := range upServices {
		env := &upEnv{
			Ctx: ctx, NC: nc, Connect: conns.connect, ConnectEraser: conns.connectEraser, NATSURL: natsURL, Store: store,
			Logger: log.With("service", svc.Name), Registry: o.Registry, Mux: o.Mux,
			Configs: f.configs(), AddReady: o.AddReady,
		}
		a, err := svc.Start(env)
		if err != nil {
			return fmt.Errorf("start %s: %w", svc.Name, err)
		}
		if a == nil || a.Execute == nil || a.Interrupt == nil {
			return fmt.Errorf("start %s: no actor", svc.Name)
		}
		g.Add(a.Execute, a.Interrupt)
		log.Info("service started", "service", svc.Name)
	}
	opshttp.Serve(&g, ln, httpauth.RequireTenants(f.httpToken, f.tenantTokens, o.Mux), log)

	httpURL := "http://" + embednats.DisplayAddr(ln.Addr())
	fmt.Fprintf(stdout, "dashboard: %s/\n", httpURL)
	fmt.Fprintf(stdout, "nats: %s\n", natsURL)
	fmt.Fprintf(stdout, "readyz: %s/readyz\n", httpURL)
	fmt.Fprintf(stdout, "data: %s (sync %s)\n", f.dataDir, f.sync)
	if quiet {
		fmt.Fprintf(stdout, "logs: warnings and errors only on this terminal (--log-level info for all)\n")
	}
	log.Info("sessionlog up", "dashboard", httpURL+"/", "nats", natsURL, "data_dir", f.dataDir, "sync", f.sync,
		"services", len(upServices))
	return runGroup(ctx, &g, log)
}
