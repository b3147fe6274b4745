// Package opshttp is the operational HTTP surface of a sessionlog process:
// /healthz, /readyz (200 only when every named readiness check passes,
// with each check's answer) and /metrics (a registry of its own with the
// Go, process and sessionlog_build_info collectors), on a mux that the
// process's services may add their own routes to; and the listener and
// server that serve it as an actor of an oklog/run group.
package opshttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessionlog/sessionlog/internal/version"
)

// Surface is the operational HTTP surface of a process: /healthz, /readyz,
// /metrics on a mux that services may add their own routes to.
type Surface struct {
	Mux      *http.ServeMux
	Registry *prometheus.Registry

	mu     sync.Mutex
	checks map[string]func() error
}

// New returns a mux serving /healthz, /readyz and /metrics (a fresh
// registry with the Go and process collectors).
func New() *Surface {
	o := &Surface{Mux: http.NewServeMux(), Registry: prometheus.NewRegistry(), checks: map[string]func() error{}}
	o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	o.register(o.Mux)
	return o
}

// register adds /healthz, /readyz and /metrics to mux.
func (o *Surface) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("GET /readyz", o.serveReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{Registry: o.Registry}))
}

// MetricsHandler serves /healthz, /readyz and /metrics alone: what
// --metrics-listen serves without the API token, for a scraper and
// probes that hold none.
func (o *Surface) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	o.register(mux)
	return mux
}

// AddReady adds a readiness check: /readyz is 200 only when every check
// returns nil.
func (o *Surface) AddReady(name string, check func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks[name] = check
}

// Ready runs every check; the map holds "ok" or the error text.
func (o *Surface) Ready() (map[string]string, bool) {
	o.mu.Lock()
	checks := make(map[string]func() error, len(o.checks))
	for k, v := range o.checks {
		checks[k] = v
	}
	o.mu.Unlock()
	out := make(map[string]string, len(checks))
	ok := true
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := checks[n](); err != nil {
			out[n] = err.Error()
			ok = false
		} else {
			out[n] = "ok"
		}
	}
	return out, ok
}

func (o *Surface) serveReady(w http.ResponseWriter, _ *http.Request) {
	checks, ok := o.Ready()
	status := "ok"
	code := http.StatusOK
	if !ok {
		status, code = "unavailable", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "checks": checks})
}

// NATSReady is a readiness check for a connection.
func NATSReady(nc *nats.Conn) func() error {
	return func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", strings.ToLower(nc.Status().String()))
		}
		return nil
	}
}

// Listen binds a TCP address. Commands bind every listener before their
// group starts, so a bad address fails at once.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listen %s: %w", addr, err)
	}
	return ln, nil
}

// Serve adds an actor serving h on ln to g. Its interrupt cancels the
// request contexts (long-lived SSE streams end), then shuts the server down
// gracefully, closing what is left after a few seconds.
func Serve(g *run.Group, ln net.Listener, h http.Handler, log *slog.Logger) {
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	g.Add(func() error {
		log.Info("http listening", "addr", ln.Addr().String())
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	}, func(error) {
		cancel()
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	})
}

// buildInfo is sessionlog_build_info: 1, labelled with the release, the
// commit and the Go version the process was built from (version.Get).
func buildInfo() prometheus.Collector {
	in := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sessionlog_build_info",
		Help:        "Always 1; the labels say which sessionlog build this process is.",
		ConstLabels: prometheus.Labels{"version": in.Release, "revision": in.Revision, "goversion": in.Go, "modified": strconv.FormatBool(in.Modified)},
	})
	g.Set(1)
	return g
}
