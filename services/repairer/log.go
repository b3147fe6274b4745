package repairer

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Log is what the repairer needs of the log: the operations it calls,
// named as internal/logstore names them. *logstore.Store is the log it
// runs on; the rule scripts (testdata/repair) also run it on an in-memory
// log (internal/memlog).
type Log interface {
	Config() logstore.Config
	Locate(sessionID string) (logstore.Location, error)

	// Events: the fold reads the session judged, from its start or its
	// snapshot; a repair is appended after the tail it was planned from,
	// alone or in a grouped batch.
	ReadJudged(ctx context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error)
	LoadSnapshot(ctx context.Context, sessionID string) (*logstore.SnapshotBase, error)
	NextAfter(ctx context.Context, sessionID string, after uint64) (*logstore.Msg, error)
	Messages(req *logstore.AppendRequest) ([]*nats.Msg, error)
	Append(ctx context.Context, req logstore.AppendRequest) (logstore.AppendResult, error)
	AppendGroup(ctx context.Context, parts []logstore.GroupPart) ([]logstore.AppendResult, error)

	// Leases and claims: who holds a session, and which sessions were
	// ever claimed.
	LeaseRecord(ctx context.Context, sessionID string) (logstore.LeaseRecord, error)
	EndLease(ctx context.Context, sessionID string, revision uint64) error
	WatchLeases(ctx context.Context) (*logstore.LeaseWatch, error)
	ClaimEntry(ctx context.Context, sessionID string) (uint64, time.Time, error)
	ClaimRevision(ctx context.Context, sessionID string) (uint64, error)
	ClaimedSessions(ctx context.Context, fn func(sessionID string)) error
	DropClaim(ctx context.Context, sessionID string, revision uint64) error

	// Writable probes whether the log takes writes (outage.go).
	Writable(ctx context.Context) (leaders []string, err error)
	// CountUsage adds the repair events' bytes to their tenant's usage
	// (logstore.UsageCounter).
	CountUsage(ctx context.Context, tenant string, d logstore.TenantUsage) error
}

var _ Log = (*logstore.Store)(nil)
