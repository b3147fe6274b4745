package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

// The services, each built as cmd builds it (package assemble, from its
// Default configuration), then Run(ctx), Ready().

type faultService interface {
	Run(ctx context.Context) error
	Ready() error
}

type faultSvcEnv struct {
	Store    *logstore.Store
	Conn     *nats.Conn
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Spec     *faultSvcSpec
}

// faultRoles are the service roles in the order they are started.
var faultRoles = []string{"writer", "repairer", "projector", "forker"}

// faultNewService builds one service; the handler, if any, is served on
// the child's HTTP address beside /readyz.
func faultNewService(role string, env faultSvcEnv) (faultService, http.Handler, error) {
	deps := assemble.Deps{Conn: env.Conn, Logger: env.Logger, Registerer: env.Registry}
	switch role {
	case "writer":
		cfg := assemble.DefaultWriter()
		cfg.LeaseTTL = env.Spec.LeaseTTL
		s, err := assemble.NewWriter(cfg, env.Store, deps)
		return s, nil, err
	case "projector":
		deps.Gatherer = env.Registry
		s, err := assemble.NewProjector(assemble.DefaultProjector(env.Spec.DataDir), env.Store, deps)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Handler(), nil
	case "forker":
		cfg := assemble.DefaultForker()
		cfg.SweepEvery, cfg.StaleAfter = env.Spec.Sweep, 3*env.Spec.Sweep
		// The shipped fork timeout is 30 min; each JetStream call of a
		// fork has its own bound. This shortens the fork's, to tell a
		// stall of a fork as a whole from one of a call.
		if os.Getenv("SESSIONLOG_FAULTS_FORK_TIMEOUT") != "" {
			cfg.ForkTimeout, _ = time.ParseDuration(os.Getenv("SESSIONLOG_FAULTS_FORK_TIMEOUT"))
		}
		s, err := assemble.NewForker(cfg, env.Store, deps)
		return s, nil, err
	case "repairer":
		cfg := assemble.DefaultRepairer()
		cfg.LeaseTTL, cfg.Grace, cfg.SweepInterval = env.Spec.LeaseTTL, env.Spec.Grace, env.Spec.Sweep
		s, err := assemble.NewRepairer(cfg, env.Store, deps)
		return s, nil, err
	}
	return nil, nil, fmt.Errorf("unknown service %q", role)
}

func faultRunService(role string, spec *faultSvcSpec) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("svc", spec.Instance)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	nc, err := nats.Connect(spec.URLs,
		nats.Name("fault-"+spec.Instance),
		nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond),
		nats.Timeout(2*time.Second), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(3))
	if err != nil {
		return err
	}
	defer nc.Close()
	// Services hold no stream-admin rights in production: the harness
	// provisions, they only open. Opening needs the cluster, which a
	// fault may have taken away: retry.
	var st *logstore.Store
	for {
		octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
		st, err = logstore.Open(octx, nc, logstore.Config{Replicas: faultNodes, NoProvision: true, LeaseTTL: spec.LeaseTTL, Logger: log})
		ocancel()
		if err == nil {
			break
		}
		log.Warn("open store", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	reg := prometheus.NewRegistry()
	svc, h, err := faultNewService(role, faultSvcEnv{Store: st, Conn: nc, Logger: log, Registry: reg, Spec: spec})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := svc.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	if h != nil {
		mux.Handle("/", h)
	}
	ln, err := net.Listen("tcp", spec.HTTPAddr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	err = svc.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
