// Package assemble builds each sessionlog service from its configuration
// and a log store: one constructor per service, called by the standalone
// command, by `sessionlog up`, by the fault suite, by the test agent and by
// the benchmarks alike, so their settings cannot drift. A service's
// configuration is the service's own Config (the projector's with the one
// setting assemble adds, OTLPEndpoint), declared and documented there;
// it starts from assemble's Default function, which is the service's
// DefaultConfig, and a caller changes only the fields it means to (a
// flag, a test's short sweep). What a process gives every service (its
// connection, logger, registry and clock) is Deps, and the store is an
// argument of its own: a constructor sets those fields of the Config.
package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/services/eraser"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/repairer"
	"github.com/sessionlog/sessionlog/services/source"
	"github.com/sessionlog/sessionlog/services/writer"
)

// Deps are what a service gets from the process that runs it. Conn is
// required by every service but the projector; every other field
// may be nil: the service then logs nowhere, registers no metrics and uses
// time.Now.
type Deps struct {
	// Conn is the connection a service serves its endpoints on (the
	// store's own or another one).
	Conn *nats.Conn
	// Operator, when set, is a connection with the operator's rights
	// (sessions.api.erase): the projector relays the dashboard's erase on
	// it, and refuses that action without it.
	Operator   *nats.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on the projector's /metrics by its
	// Handler (a process that serves /metrics itself leaves it nil).
	Gatherer prometheus.Gatherer
	Now      func() time.Time
}

var errNoStore = errors.New("assemble: no log store")

// Writer is the writer's configuration: writer.Config. NewWriter sets
// its Store and the fields Deps gives (Conn, Logger, Registerer, Now).
type Writer = writer.Config

// DefaultWriter is the writer's configuration unless a caller changes it:
// writer.DefaultConfig, with the store's default lease TTL.
func DefaultWriter() Writer {
	c := writer.DefaultConfig()
	c.LeaseTTL = logstore.DefaultLeaseTTL
	return c
}

// NewWriter builds the writer (sessions.api.append, heartbeat, read) on st.
func NewWriter(cfg Writer, st *logstore.Store, d Deps) (*writer.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	cfg.Store, cfg.Conn, cfg.Logger, cfg.Registerer, cfg.Now = st, d.Conn, d.Logger, d.Registerer, d.Now
	return writer.New(cfg)
}

// Projector is the projector's configuration: projector.Config, and
// OTLPEndpoint, which NewProjector makes its Observer. NewProjector sets
// its Store and the fields Deps gives (Conn, Operator, Logger,
// Registerer, Gatherer, Now).
type Projector struct {
	projector.Config
	// OTLPEndpoint, when set, is an OTLP/HTTP collector each turn is
	// exported to as a trace when it ends (package otelexport), through
	// a bounded queue that never holds the projector back; it is then the
	// projector's Observer.
	OTLPEndpoint string
}

// DefaultProjector is the projector's configuration for a store in
// dataDir: projector.DefaultConfig.
func DefaultProjector(dataDir string) Projector {
	c := projector.DefaultConfig()
	c.DataDir = dataDir
	return Projector{Config: c}
}

// NewProjector builds the projector (read models, HTTP API, watch) on st.
func NewProjector(cfg Projector, st *logstore.Store, d Deps) (*projector.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	if cfg.DataDir == "" {
		return nil, errors.New("assemble: projector: no data directory")
	}
	pc := cfg.Config
	pc.Store, pc.Conn, pc.Operator, pc.Logger, pc.Registerer, pc.Gatherer, pc.Now = st, d.Conn, d.Operator, d.Logger, d.Registerer, d.Gatherer, d.Now
	if cfg.OTLPEndpoint != "" {
		exp, err := otelexport.NewOTLPHTTP(context.Background(), cfg.OTLPEndpoint, otelexport.DefaultExportTimeout)
		if err != nil {
			return nil, fmt.Errorf("assemble: projector: %w", err)
		}
		live, err := otelexport.NewLive(otelexport.LiveConfig{Exporter: exp, Store: st, Logger: d.Logger, Registerer: d.Registerer})
		if err != nil {
			return nil, err
		}
		pc.Observer = live
	}
	return projector.New(pc)
}

// Repairer is the repairer's configuration: repairer.Config. NewRepairer
// sets its Store and the fields Deps gives (Conn, Logger, Registerer,
// Now).
type Repairer = repairer.Config

// DefaultRepairer is the repairer's configuration unless a caller changes
// it: repairer.DefaultConfig, with the store's default lease TTL and
// GroupInflight 0, which New sets by the store's replicas (1 on one).
func DefaultRepairer() Repairer {
	c := repairer.DefaultConfig()
	c.LeaseTTL = logstore.DefaultLeaseTTL
	c.GroupInflight = 0
	return c
}

// NewRepairer builds the repairer on st.
func NewRepairer(cfg Repairer, st *logstore.Store, d Deps) (*repairer.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	cfg.Store, cfg.Conn, cfg.Logger, cfg.Registerer, cfg.Now = st, d.Conn, d.Logger, d.Registerer, d.Now
	return repairer.New(cfg)
}

// Source is the source service's configuration: source.Config. NewSource
// sets its Store and the fields Deps gives (Conn, Logger, Registerer,
// Now).
type Source = source.Config

// DefaultSource is the source service's configuration unless a caller
// changes it: source.DefaultConfig.
func DefaultSource() Source { return source.DefaultConfig() }

// NewSource builds the source service (sessions.api.source.*) on st; it
// reads and appends sessions through the writer on Deps.Conn.
func NewSource(cfg Source, st *logstore.Store, d Deps) (*source.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	cfg.Store, cfg.Conn, cfg.Logger, cfg.Registerer, cfg.Now = st, d.Conn, d.Logger, d.Registerer, d.Now
	return source.New(cfg)
}

// Eraser is the eraser's configuration: eraser.Config. NewEraser sets its
// Store and the fields Deps gives (Conn, Logger, Registerer, Now).
type Eraser = eraser.Config

// DefaultEraser is the eraser's configuration unless a caller changes it:
// eraser.DefaultConfig.
func DefaultEraser() Eraser { return eraser.DefaultConfig() }

// NewEraser builds the eraser (sessions.api.erase, erase jobs, retention)
// on st; Deps.Conn must be a user that may delete (deploy/nats, "eraser").
func NewEraser(cfg Eraser, st *logstore.Store, d Deps) (*eraser.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	cfg.Store, cfg.Conn, cfg.Logger, cfg.Registerer, cfg.Now = st, d.Conn, d.Logger, d.Registerer, d.Now
	return eraser.New(cfg)
}

// Forker is the forker's configuration: forker.Config. NewForker sets its
// Store and the fields Deps gives (Conn, Logger, Registerer, Now).
type Forker = forker.Config

// DefaultForker is the forker's configuration unless a caller changes it:
// forker.DefaultConfig.
func DefaultForker() Forker { return forker.DefaultConfig() }

// NewForker builds the forker on st.
func NewForker(cfg Forker, st *logstore.Store, d Deps) (*forker.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	cfg.Store, cfg.Conn, cfg.Logger, cfg.Registerer, cfg.Now = st, d.Conn, d.Logger, d.Registerer, d.Now
	return forker.New(cfg)
}
