package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/progress"
)

// Defaults of `sessionlog up` (DESIGN.md section 10).
const (
	defaultDataDir    = "./data"
	defaultNATSListen = "127.0.0.1:4222"
	defaultHTTPListen = "127.0.0.1:8080"
	// defaultSync: an acknowledged event is on disk (DESIGN.md section 4).
	defaultSync = "always"
	// The server allows 50 open atomic batches per stream by default; one
	// process with several services and clients opens more than that under
	// load, and a refused batch is only a retry, so allow more.
	upMaxBatchInflightPerStream = 1000
	upMaxBatchInflightTotal     = 4000
	natsReadyTimeout            = 2 * time.Minute
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
	ln, err := listen(f.httpListen)
	if err != nil {
		return err
	}
	defer ln.Close()

	ns, err := startEmbedded(opts, log.With("component", "nats-server"))
	if err != nil {
		return err
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()

	conns := &connSet{}
	defer conns.closeAll()
	// The services connect in-process as up's own service user (none when
	// NATS is open), with the services' inbox prefix.
	nf := &natsFlags{Inbox: natsauth.ServiceInboxPrefix, Log: log}
	if svcUser != nil {
		nf.User, nf.Password = svcUser.Username, svcUser.Password
	}
	// The eraser (and the repairer, as before the eraser was a service of
	// its own) logs in as up's eraser user where there is one.
	ef := *nf
	if er := upUser(opts, upEraserUser); er != nil {
		ef.User, ef.Password = er.Username, er.Password
	}
	connectAs := func(nf *natsFlags, name string) (*nats.Conn, error) {
		o, err := nf.options(name)
		if err != nil {
			return nil, err
		}
		nc, err := nats.Connect(ns.ClientURL(), append(o, nats.InProcessServer(ns))...)
		if err != nil {
			return nil, fmt.Errorf("in-process nats connection: %w", err)
		}
		conns.add(nc)
		return nc, nil
	}
	connect := func(name string) (*nats.Conn, error) { return connectAs(nf, name) }
	connectEraser := func(name string) (*nats.Conn, error) { return connectAs(&ef, name) }
	nc, err := connect("sessionlog-up")
	if err != nil {
		return err
	}
	// A full disk: /readyz says so, appends are refused at once, and
	// JetStream reopens the store once space is freed (up_disk.go).
	sw := newStoreWatch(ns, opts, f.dataDir, log.With("component", "store"))
	store, err := openStore(ctx, nc, logstore.Config{Replicas: 1, Partitions: *f.partitions, LeaseTTL: f.leaseTTL, Logger: log.With("component", "logstore"),
		// On one node that does not fsync per event, an atomic batch costs
		// more than the publishes it gathers (docs/adr/008-group-commit.md).
		NoGroupCommit: !opts.SyncAlways, CannotStore: sw.Err})
	if err != nil {
		return err
	}

	o := newOps()
	o.AddReady("nats", func() error {
		if !ns.JetStreamEnabled() {
			return errors.New("jetstream not enabled")
		}
		return natsReady(nc)()
	})
	o.AddReady("store", sw.Err)
	natsURL := clientURL(ns)
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
		g.Add(func() error { return sw.run(wctx) }, func(error) { cancel() })
	}
	for _, svc := range upServices {
		env := &upEnv{
			Ctx: ctx, NC: nc, Connect: connect, ConnectEraser: connectEraser, NATSURL: natsURL, Store: store,
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
	serveOps(&g, ln, httpauth.RequireTenants(f.httpToken, f.tenantTokens, o.Mux), log)

	httpURL := "http://" + displayAddr(ln.Addr())
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

// upServerOptions builds the embedded server's options: --nats-config if
// given, then the flags. A flag overrides the file only when it was given
// (on the command line or by its variable); otherwise the file's value, or
// the default, holds.
func upServerOptions(fs *flag.FlagSet, f *upFlags) (*server.Options, *server.User, error) {
	opts := &server.Options{}
	fromFile := f.natsConfig != ""
	if fromFile {
		var err error
		if opts, err = server.ProcessConfigFile(f.natsConfig); err != nil {
			return nil, nil, configError(f.natsConfig, err)
		}
	}
	if !fromFile || flagGiven(fs, "nats-listen") || (opts.Host == "" && opts.Port == 0) {
		host, port, err := splitHostPort(f.natsListen)
		if err != nil {
			return nil, nil, usageErrorf("--nats-listen %q: %v", f.natsListen, err)
		}
		if port == 0 {
			port = server.RANDOM_PORT // 0 means 4222 to nats-server
		}
		opts.Host, opts.Port = host, port
	}
	if !fromFile || flagGiven(fs, "data-dir") || opts.StoreDir == "" {
		opts.StoreDir = filepath.Join(f.dataDir, "nats")
	}
	if opts.ServerName == "" {
		opts.ServerName = "sessionlog"
	}
	opts.JetStream = true
	// up handles signals itself and shuts the server down last.
	opts.NoSigs = true
	// --sync, unless a --nats-config that sets sync_interval holds and the
	// flag was not given: a file that says nothing gets the fsync before
	// every acknowledgement, not the server's lazy default.
	if !fromFile || flagGiven(fs, "sync") || (!opts.SyncAlways && opts.SyncInterval == 0) {
		opts.SyncAlways = f.sync == "always"
	} else if !opts.SyncAlways {
		f.sync = "interval" // the file's, as up reports it
	}
	if opts.JetStreamLimits.MaxBatchInflightPerStream == 0 {
		opts.JetStreamLimits.MaxBatchInflightPerStream = upMaxBatchInflightPerStream
	}
	if opts.JetStreamLimits.MaxBatchInflightTotal == 0 {
		opts.JetStreamLimits.MaxBatchInflightTotal = upMaxBatchInflightTotal
	}
	svc, err := upUsers(opts, f, fromFile)
	if err != nil {
		return nil, nil, err
	}
	if svc == nil && !loopbackHost(opts.Host) {
		return nil, nil, usageErrorf("NATS would listen on %q with no credentials: give agents a user (--nats-user/--nats-password) or listen on loopback (--nats-listen 127.0.0.1:4222)", opts.Host)
	}
	return opts, svc, nil
}

// upServiceUser is the name of the user up's own services log in as. Its
// password is new on every start and never leaves the process.
const upServiceUser = "sessionlog-up-services"

// upEraserUser is the user up's repairer logs in as: the services' rights
// plus erasure (natsauth.Eraser), with the same password.
const upEraserUser = "sessionlog-up-eraser"

// upUser returns the embedded server's user of that name, nil if none.
func upUser(opts *server.Options, name string) *server.User {
	for _, u := range opts.Users {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// upUsers sets the embedded server's users (DESIGN.md section 10) and
// returns the one up's services log in as, or nil when NATS is open.
//
// Without --nats-config: --nats-user gets the agent permissions and
// --operator-user the whole account, both from deploy/nats/perms.go, the
// definition deploy/nats/auth.conf spells for nats-server; the services
// get its service permissions. With --nats-config the file defines the
// users; the services get a user of their own in the account and with the
// permissions of the file's "service" user.
func upUsers(opts *server.Options, f *upFlags, fromFile bool) (*server.User, error) {
	password, err := randomPassword()
	if err != nil {
		return nil, err
	}
	if fromFile {
		// The passwords alone may be set: SESSIONLOG_OPERATOR_PASSWORD is
		// also a variable auth.conf reads.
		if f.natsUser != "" || f.operatorUser != "" {
			return nil, usageErrorf("--nats-user and --operator-user do not go with --nats-config: its users apply")
		}
		return upConfigServiceUser(opts, f.natsConfig, password)
	}
	if (f.natsUser == "") != (f.natsPassword == "") {
		return nil, usageErrorf("--nats-user and --nats-password go together")
	}
	if (f.operatorUser == "") != (f.operatorPassword == "") {
		return nil, usageErrorf("--operator-user and --operator-password go together")
	}
	if f.operatorUser != "" && f.natsUser == "" {
		return nil, usageErrorf("--operator-user needs --nats-user: without it NATS is open to everyone")
	}
	if f.operatorUser != "" && f.operatorUser == f.natsUser {
		return nil, usageErrorf("--operator-user and --nats-user must differ")
	}
	if f.natsUser == "" {
		return nil, nil
	}
	for _, own := range []string{upServiceUser, upEraserUser} {
		if f.natsUser == own || f.operatorUser == own {
			return nil, usageErrorf("user %q is up's own", own)
		}
	}
	// The agents' user is the default tenant's one user, in its account;
	// the services and the operator are in the services' account, which
	// exports the agents' subjects to it (ADR 010).
	opts.Users = nil
	acc, err := natsauth.Accounts(opts, []natsauth.Tenant{{Name: natsauth.DefaultTenant,
		Users: []natsauth.TenantUser{{Name: f.natsUser, Password: f.natsPassword}}}})
	if err != nil {
		return nil, usageErrorf("--nats-user: %v", err)
	}
	svc := &server.User{Username: upServiceUser, Password: password, Account: acc, Permissions: natsauth.Service()}
	opts.Users = append(opts.Users, svc,
		&server.User{Username: upEraserUser, Password: password, Account: acc, Permissions: natsauth.Eraser()})
	if f.operatorUser != "" {
		opts.Users = append(opts.Users, &server.User{Username: f.operatorUser, Password: f.operatorPassword, Account: acc, Permissions: natsauth.Operator()})
	}
	return svc, nil
}

// clonePermissions copies p: the server fills in defaults on the copy it
// is given, and users must not share it.
func clonePermissions(p *server.Permissions) *server.Permissions {
	if p == nil {
		return nil
	}
	sp := func(s *server.SubjectPermission) *server.SubjectPermission {
		if s == nil {
			return nil
		}
		return &server.SubjectPermission{Allow: slices.Clone(s.Allow), Deny: slices.Clone(s.Deny)}
	}
	out := &server.Permissions{Publish: sp(p.Publish), Subscribe: sp(p.Subscribe)}
	if p.Response != nil {
		r := *p.Response
		out.Response = &r
	}
	return out
}

// upConfigServiceUser adds up's service user to a --nats-config that asks
// for authentication: in the account and with the permissions of the
// file's "service" user.
func upConfigServiceUser(opts *server.Options, path, password string) (*server.User, error) {
	if len(opts.Users) == 0 && len(opts.Nkeys) == 0 && opts.Username == "" && opts.Authorization == "" && len(opts.TrustedOperators) == 0 {
		return nil, nil // the file asks for no authentication
	}
	var tmpl *server.User
	for _, u := range opts.Users {
		if u.Username == upServiceUser || u.Username == upEraserUser {
			return nil, fmt.Errorf("--nats-config %s: user %q is up's own", path, u.Username)
		}
		if u.Username == "service" {
			tmpl = u
		}
	}
	if tmpl == nil {
		return nil, fmt.Errorf("--nats-config %s: no user \"service\" whose account and permissions up's services can take (see deploy/nats/auth.conf)", path)
	}
	svc := &server.User{Username: upServiceUser, Password: password, Account: tmpl.Account, Permissions: clonePermissions(tmpl.Permissions)}
	opts.Users = append(opts.Users, svc)
	// The repairer takes the file's "eraser" user's rights (erase,
	// retention); a file without one leaves it the services' rights.
	if er := upUser(opts, "eraser"); er != nil {
		opts.Users = append(opts.Users, &server.User{Username: upEraserUser, Password: password, Account: er.Account, Permissions: clonePermissions(er.Permissions)})
	}
	return svc, nil
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("service password: %w", err)
	}
	return "p" + hex.EncodeToString(b), nil
}

// loopbackHost: an address only this host can reach.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// missingVar finds the variable nats-server's parser could not resolve.
var missingVar = regexp.MustCompile(`variable reference for '([^']+)'`)

// configError names the environment variable a config references but the
// environment lacks (nats-server reports it only as a parse error).
func configError(path string, err error) error {
	if m := missingVar.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("--nats-config %s: environment variable %s is not set; the config references it (%v)", path, m[1], err)
	}
	return fmt.Errorf("--nats-config %s: %w", path, err)
}

// connSet closes the connections up opened, after the group has stopped.
type connSet struct {
	mu    sync.Mutex
	conns []*nats.Conn
}

func (c *connSet) add(nc *nats.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns = append(c.conns, nc)
}

func (c *connSet) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.conns) - 1; i >= 0; i-- {
		// Flush what services published last, bounded.
		_ = c.conns[i].FlushTimeout(2 * time.Second)
		c.conns[i].Close()
	}
	c.conns = nil
}

// startEmbedded starts the server and waits until it accepts clients and
// JetStream is up. A listen failure is reported by the server through its
// logger's Fatalf, which is caught here instead of exiting.
func startEmbedded(opts *server.Options, log *slog.Logger) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	sl := &serverLogger{log: log, fatal: make(chan string, 1)}
	ns.SetLoggerV2(sl, false, false, false)
	go ns.Start()
	deadline := time.Now().Add(natsReadyTimeout)
	for !ns.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-sl.fatal:
			ns.Shutdown()
			return nil, fmt.Errorf("nats-server: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			ns.Shutdown()
			return nil, fmt.Errorf("nats-server not ready after %s", natsReadyTimeout)
		}
	}
	if opts.JetStream && !ns.JetStreamEnabled() {
		ns.Shutdown()
		return nil, errors.New("nats-server: jetstream did not start")
	}
	return ns, nil
}

func clientURL(ns *server.Server) string {
	if a, ok := ns.Addr().(*net.TCPAddr); ok {
		return "nats://" + displayAddr(a)
	}
	return ns.ClientURL()
}

// displayAddr turns a wildcard bind address into one a browser can open.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// serverLogger forwards nats-server logs to slog.
type serverLogger struct {
	log   *slog.Logger
	fatal chan string
}

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg, "fatal", true)
	select {
	case l.fatal <- msg:
	default:
	}
}

var _ server.Logger = (*serverLogger)(nil)

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, port, nil
}
