package eraser

import (
	"context"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Log is what the eraser needs of the log: the operations it calls,
// named as internal/logstore names them. *logstore.Store is the log it
// runs on; the rule scripts (testdata/erase) also run it on an in-memory
// log (internal/memlog).
type Log interface {
	// The session's events: read to count what is erased, deleted
	// securely a page at a time.
	TailPosition(ctx context.Context, sessionID string) (logstore.Tail, *logstore.UnreadableError, error)
	NextAfter(ctx context.Context, sessionID string, after uint64) (*logstore.Msg, error)
	ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error)
	ReadSessionTo(ctx context.Context, sessionID string, afterStreamSeq uint64, tail logstore.Tail, fn func(*logstore.Msg) error) (logstore.Tail, error)
	// Every stored message up to a tail with the read's verdict on it
	// (logstore.WalkStored): the seal's read and retention's archive go
	// on past one a read refuses.
	ReadVerdicts(ctx context.Context, sessionID string, afterStreamSeq uint64, tail logstore.Tail, fn func(m *logstore.Msg, verdict error) error) error
	// The owner and grants an erased session's records keep are folded
	// from its snapshot and the events after it as every reader judges
	// them.
	ReadJudged(ctx context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error)
	LoadSnapshot(ctx context.Context, sessionID string) (*logstore.SnapshotBase, error)
	StoredPage(ctx context.Context, sessionID string, n int) ([]*logstore.Msg, error)
	SecureDelete(ctx context.Context, sessionID string, seqs []uint64, inFlight int, onDelete func() error) error
	// Shred removes the hashed messages of a session with sealed bodies
	// at once: its key destroyed, its subject purged (0: not done).
	Shred(ctx context.Context, sessionID string, through uint64, onDelete func() error) (int, error)
	CheckErasable(ctx context.Context, sessionID string) error
	// A session never appended to is erased when its lease or claim
	// records are left.
	LeaseRecord(ctx context.Context, sessionID string) (logstore.LeaseRecord, error)
	GetClaim(ctx context.Context, sessionID string) (*logstore.Claim, error)
	// HasKey: a store that seals made the session's data key with its
	// first lease or claim.
	HasKey(ctx context.Context, sessionID string) (bool, error)
	DropSessionRecords(ctx context.Context, sessionID string) error

	// The erasure records (DESIGN.md section 14) and the audit trail.
	ErasureOf(ctx context.Context, sessionID string) (*logstore.Erasure, uint64, error)
	MarkErased(ctx context.Context, e logstore.Erasure) (logstore.Erasure, uint64, error)
	UpdateErasure(ctx context.Context, e logstore.Erasure, rev uint64) (uint64, error)
	FollowErasureRecords(ctx context.Context, ready chan<- struct{}, fn func(logstore.Erasure))
	WriteAudit(ctx context.Context, rec api.AuditRecord) error

	// The forks in flight: a cascade erases the children being copied,
	// and a job waits while a live copy may still write its session.
	ForksInFlight(ctx context.Context, fn func(logstore.ForkInFlight)) error
	ForkInFlightOf(ctx context.Context, child string) (f logstore.ForkInFlight, ok bool, err error)

	// Retention walks every session's last stored message.
	ListSessions(ctx context.Context) ([]logstore.SessionCount, error)
	EachLastStored(ctx context.Context, fn func(sessionID string, last *logstore.Msg) error) error
	LastStoredOf(ctx context.Context, sessionID string) (*logstore.LastStored, error)

	// An erased session leaves its tenant's usage, once.
	GiveBackErased(ctx context.Context, id string, d logstore.TenantUsage) (given bool, err error)
	ForgetGiveBack(ctx context.Context, id string) error
}

var _ Log = (*logstore.Store)(nil)
