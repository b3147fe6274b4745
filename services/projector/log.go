package projector

import (
	"context"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Log is what the projector needs of the log: the operations it calls,
// named as internal/logstore names them, besides following its streams
// (followLog). *logstore.Store is the log it runs on; the rule scripts
// (testdata/fold, testdata/rollback) run its start, consume loop, fold
// and rollback checks on an in-memory log (internal/memlog) through it.
// The HTTP side (package httpapi) reads the log through the interface
// it declares (httpapi.Log, made of Config.Store): its watches' live
// events, the audit records, the exports.
type Log interface {
	// What the fold reads (foldLog), and what the start, the catch-up
	// and the erasure watch read (catchUpLog).
	foldLog
	catchUpLog
	// What the rollback checks read (rollbackLog).
	rollbackLog
	// Connected: readiness needs the log's connection up.
	Connected() bool
}

// rollbackLog is what the rollback checks read of the log (rollback.go,
// lost.go): the message at a consumed position, whether a session whose
// message is gone was erased, what the server says it lost of a stream,
// and how many times the connection reconnected (a single server that
// restarted).
type rollbackLog interface {
	MsgAt(ctx context.Context, stream string, seq uint64) (*logstore.Msg, error)
	Erased(ctx context.Context, sessionID string) (bool, error)
	StreamLost(ctx context.Context, stream string) (*logstore.LostData, error)
	Reconnects() uint64
}

// follower delivers a stream's messages in order (logstore.Follower's
// Next).
type follower interface {
	Next(ctx context.Context) (*logstore.Msg, error)
	Close()
}

// followLog is a Log whose streams the consume loop follows: each
// stream's messages in order after a position (Follow).
type followLog interface {
	Log
	Follow(ctx context.Context, spec logstore.FollowSpec) (follower, error)
}

// follows is the followLog of a Log whose Follow gives a follower of its
// own type (logstore's, internal/memlog's).
type follows[F follower] struct {
	Log
	follow func(ctx context.Context, spec logstore.FollowSpec) (F, error)
}

func (l follows[F]) Follow(ctx context.Context, spec logstore.FollowSpec) (follower, error) {
	f, err := l.follow(ctx, spec)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Followed is a Log whose streams the consume loop follows, each with a
// follower of the log's own type F (Follow): *logstore.Store
// (*logstore.Follower), internal/memlog's log (*memlog.Follower). Rebuild
// and Verify fold from one.
type Followed[F follower] interface {
	Log
	Follow(ctx context.Context, spec logstore.FollowSpec) (F, error)
}

// followsOf is l as the consume loop reads it.
func followsOf[F follower](l Followed[F]) followLog {
	return follows[F]{l, l.Follow}
}

var (
	_ Log         = (*logstore.Store)(nil)
	_ rollbackLog = (*logstore.Store)(nil)
)
