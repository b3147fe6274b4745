// Package assemble builds each sessionlog service from its configuration
// and a log store: one constructor per service, called by the standalone
// command, by `sessionlog up`, by the fault suite, by the test agent and by
// the benchmarks alike, so their settings cannot drift. Each service's
// configuration starts from its Default function; a caller changes only
// the fields it means to (a flag, a test's short sweep).
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

// Writer is the writer's configuration.
type Writer struct {
	// LeaseTTL is the TTL of session leases (the store's is what the KV
	// entries get; the writer throttles renewals by this one).
	LeaseTTL time.Duration
	// MaxConcurrent bounds requests handled at once.
	MaxConcurrent int
	// StateCacheSize bounds the sessions whose folded state is cached.
	StateCacheSize int
	// TenantEventsPerSecond bounds each tenant's appended events per
	// second (0: none).
	TenantEventsPerSecond float64
	// TenantMaxSessions and TenantMaxBytes bound each tenant's sessions
	// and their stored bytes (0: none), kept in TENANT_USAGE.
	TenantMaxSessions int64
	TenantMaxBytes    int64
	// TenantBounds replaces both for the tenants it names.
	TenantBounds map[string]logstore.TenantBound
}

// DefaultWriter is the writer's configuration unless a caller changes it:
// writer.DefaultConfig's, with the store's default lease TTL.
func DefaultWriter() Writer {
	d := writer.DefaultConfig()
	return Writer{LeaseTTL: logstore.DefaultLeaseTTL, MaxConcurrent: d.MaxConcurrent, StateCacheSize: d.StateCacheSize}
}

// NewWriter builds the writer (sessions.api.append, heartbeat, read) on st.
func NewWriter(cfg Writer, st *logstore.Store, d Deps) (*writer.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	return writer.New(writer.Config{
		Store: st, Conn: d.Conn, Logger: d.Logger, Registerer: d.Registerer, Now: d.Now,
		LeaseTTL: cfg.LeaseTTL, MaxConcurrent: cfg.MaxConcurrent, StateCacheSize: cfg.StateCacheSize,
		TenantEventsPerSecond: cfg.TenantEventsPerSecond, TenantMaxSessions: cfg.TenantMaxSessions, TenantMaxBytes: cfg.TenantMaxBytes,
		TenantBounds: cfg.TenantBounds,
	})
}

// Projector is the projector's configuration.
type Projector struct {
	// DataDir holds the Pebble read-model store (rebuildable from the stream).
	DataDir string
	// HTTPToken, when set, is required by the projector's own Handler on
	// every path but /healthz and /readyz.
	HTTPToken string
	// TenantTokens maps each tenant's token to its tenant
	// (projector.Config.TenantTokens).
	TenantTokens map[string]string
	// MaxBatchEvents bounds one Pebble batch while catching up.
	MaxBatchEvents int
	// CacheSessions bounds the fold states kept in memory.
	CacheSessions int
	// Watch bounds the memory of watch streams.
	Watch projector.WatchLimits
	// OTLPEndpoint, when set, is an OTLP/HTTP collector each turn is
	// exported to as a trace when it ends (package otelexport), through
	// a bounded queue that never holds the projector back.
	OTLPEndpoint string
}

// DefaultProjector is the projector's configuration for a store in
// dataDir: projector.DefaultConfig's.
func DefaultProjector(dataDir string) Projector {
	d := projector.DefaultConfig()
	return Projector{DataDir: dataDir, MaxBatchEvents: d.MaxBatchEvents, CacheSessions: d.CacheSessions, Watch: d.Watch}
}

// NewProjector builds the projector (read models, HTTP API, watch) on st.
func NewProjector(cfg Projector, st *logstore.Store, d Deps) (*projector.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	if cfg.DataDir == "" {
		return nil, errors.New("assemble: projector: no data directory")
	}
	pc := projector.Config{
		Store: st, Conn: d.Conn, Operator: d.Operator, DataDir: cfg.DataDir, Logger: d.Logger, Registerer: d.Registerer, Gatherer: d.Gatherer, Now: d.Now,
		HTTPToken: cfg.HTTPToken, TenantTokens: cfg.TenantTokens, MaxBatchEvents: cfg.MaxBatchEvents, CacheSessions: cfg.CacheSessions, Watch: cfg.Watch,
	}
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

// Repairer is the repairer's configuration.
type Repairer struct {
	// LeaseTTL is the TTL holders' leases are written with.
	LeaseTTL time.Duration
	// Grace is how long a lease must have expired before the session is repaired.
	Grace time.Duration
	// SweepInterval between sweeps of every claimed session.
	SweepInterval time.Duration
	// Concurrency is how many sessions are evaluated and repaired at once.
	Concurrency int
	// KeepApprovalsPending leaves pending approvals open (DESIGN.md 6).
	KeepApprovalsPending bool
}

// DefaultRepairer is the repairer's configuration unless a caller changes
// it: repairer.DefaultConfig's, with the store's default lease TTL.
func DefaultRepairer() Repairer {
	d := repairer.DefaultConfig()
	return Repairer{LeaseTTL: logstore.DefaultLeaseTTL, Grace: d.Grace, SweepInterval: d.SweepInterval, Concurrency: d.Concurrency}
}

// NewRepairer builds the repairer on st.
func NewRepairer(cfg Repairer, st *logstore.Store, d Deps) (*repairer.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	return repairer.New(repairer.Config{
		Store: st, Conn: d.Conn, Logger: d.Logger, Registerer: d.Registerer, Now: d.Now,
		LeaseTTL: cfg.LeaseTTL, Grace: cfg.Grace, SweepInterval: cfg.SweepInterval, Concurrency: cfg.Concurrency,
		KeepApprovalsPending: cfg.KeepApprovalsPending,
	})
}

// Source is the source service's configuration.
type Source struct {
	// MaxConcurrent bounds requests handled at once.
	MaxConcurrent int
	// SourceStates bounds the transcripts whose mapping state is kept
	// between appends.
	SourceStates int
	// MaxSourceBytes bounds the stored bytes of a transcript read to map
	// it again.
	MaxSourceBytes int
}

// DefaultSource is the source service's configuration unless a caller
// changes it: source.DefaultConfig's.
func DefaultSource() Source {
	d := source.DefaultConfig()
	return Source{MaxConcurrent: d.MaxConcurrent, SourceStates: d.SourceStates, MaxSourceBytes: d.MaxSourceBytes}
}

// NewSource builds the source service (sessions.api.source.*) on st; it
// reads and appends sessions through the writer on Deps.Conn.
func NewSource(cfg Source, st *logstore.Store, d Deps) (*source.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	return source.New(source.Config{
		Store: st, Conn: d.Conn, Logger: d.Logger, Registerer: d.Registerer, Now: d.Now,
		MaxConcurrent: cfg.MaxConcurrent, SourceStates: cfg.SourceStates, MaxSourceBytes: cfg.MaxSourceBytes,
	})
}

// Eraser is the eraser's configuration.
type Eraser struct {
	// SweepInterval between resumptions of unfinished erase jobs.
	SweepInterval time.Duration
	// RetainClosed, when > 0, erases sessions closed for longer than
	// this, after archiving them to ArchiveDir when set (DESIGN.md 14).
	RetainClosed time.Duration
	ArchiveDir   string
}

// DefaultEraser is the eraser's configuration unless a caller changes it:
// eraser.DefaultConfig's.
func DefaultEraser() Eraser {
	d := eraser.DefaultConfig()
	return Eraser{SweepInterval: d.SweepInterval, RetainClosed: d.RetainClosed, ArchiveDir: d.ArchiveDir}
}

// NewEraser builds the eraser (sessions.api.erase, erase jobs, retention)
// on st; Deps.Conn must be a user that may delete (deploy/nats, "eraser").
func NewEraser(cfg Eraser, st *logstore.Store, d Deps) (*eraser.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	return eraser.New(eraser.Config{
		Store: st, Conn: d.Conn, Logger: d.Logger, Now: d.Now,
		SweepInterval: cfg.SweepInterval, RetainClosed: cfg.RetainClosed, ArchiveDir: cfg.ArchiveDir,
	})
}

// Forker is the forker's configuration.
type Forker struct {
	// BatchSize is the number of events per atomic batch of a copy (at most 1000).
	BatchSize int
	// MaxConcurrent bounds forks copied at once.
	MaxConcurrent int
	// SweepEvery is how often copies left behind by a dead forker are looked for.
	SweepEvery time.Duration
	// StaleAfter: a copy whose record was not renewed this long is taken over.
	StaleAfter time.Duration
	// ForkTimeout bounds one fork request's copy.
	ForkTimeout time.Duration
}

// DefaultForker is the forker's configuration unless a caller changes it:
// forker.DefaultConfig's.
func DefaultForker() Forker {
	d := forker.DefaultConfig()
	return Forker{BatchSize: d.BatchSize, MaxConcurrent: d.MaxConcurrent, SweepEvery: d.SweepEvery, StaleAfter: d.StaleAfter, ForkTimeout: d.ForkTimeout}
}

// NewForker builds the forker on st.
func NewForker(cfg Forker, st *logstore.Store, d Deps) (*forker.Service, error) {
	if st == nil {
		return nil, errNoStore
	}
	return forker.New(forker.Config{
		Store: st, Conn: d.Conn, Logger: d.Logger, Registerer: d.Registerer, Now: d.Now,
		BatchSize: cfg.BatchSize, MaxConcurrent: cfg.MaxConcurrent, SweepEvery: cfg.SweepEvery,
		StaleAfter: cfg.StaleAfter, ForkTimeout: cfg.ForkTimeout,
	})
}
