package forker

import (
	"context"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Log is what the forker needs of the log: the operations it calls,
// named as internal/logstore names them. *logstore.Store is the log it
// runs on; the rule scripts (testdata/fork) also run it on an in-memory
// log (internal/memlog).
type Log interface {
	Config() logstore.Config

	// The parent is read judged, from its start or its snapshot; the
	// child is read to find how far an earlier copy got, and appended
	// to after its tail.
	ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error)
	ReadJudged(ctx context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error)
	LoadSnapshot(ctx context.Context, sessionID string) (*logstore.SnapshotBase, error)
	NextAfter(ctx context.Context, sessionID string, after uint64) (*logstore.Msg, error)
	Tail(ctx context.Context, sessionID string) (logstore.Tail, error)
	Append(ctx context.Context, req logstore.AppendRequest) (logstore.AppendResult, error)

	// Erased: an erased parent is not copied, an erased id not reused;
	// the record of a copy of an erased session is erased with it.
	Erased(ctx context.Context, sessionID string) (bool, error)
	EraseForkRecord(ctx context.Context, child string) error

	// A child counts in its tenant's usage (ADR 010).
	ReserveStored(ctx context.Context, tenant string, n int64, what string) (reserved bool, err error)
	CountUsage(ctx context.Context, tenant string, d logstore.TenantUsage) error
}

// Records is the forker's records of the copies in flight, one per child
// id (SESSION_FORKS; *logstore.ForkRecords).
type Records interface {
	// Create writes the child's record if it has none, else returns
	// logstore.ErrForkRecordExists.
	Create(ctx context.Context, child string, value []byte) error
	Get(ctx context.Context, child string) (rec logstore.ForkRecord, ok bool, err error)
	Put(ctx context.Context, child string, value []byte) error
	// Replace writes the record only if it is still at revision.
	Replace(ctx context.Context, child string, value []byte, revision uint64) error
	Drop(ctx context.Context, child string) error
	Children(ctx context.Context) ([]string, error)
}

// recordsOpener is a Log that keeps the fork records itself: Run opens
// them there (a *logstore.Store creates the bucket first).
type recordsOpener interface {
	OpenForkRecords(ctx context.Context) (*logstore.ForkRecords, error)
}

var (
	_ Log           = (*logstore.Store)(nil)
	_ recordsOpener = (*logstore.Store)(nil)
	_ Records       = (*logstore.ForkRecords)(nil)
)
