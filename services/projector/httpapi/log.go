package httpapi

import (
	"context"
	"iter"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// Log is what the HTTP side reads of the log (Config.Log): the
// operations it calls, named as internal/logstore names them. The
// projector hands it its *logstore.Store (LogOf); the views say what the
// projector folded, the log is read for what they do not hold: the
// events themselves, the live events, the erasures under way and the
// audit records.
type Log interface {
	logReads
	// Follow follows a stream from a position (logstore.FollowSpec: the
	// session's stream and subject, after a stream seq, in pages of at
	// most PageEvents messages and PageBytes), a page at a time: the
	// watch's durable events and the exports' pages (followDurable).
	Follow(ctx context.Context, spec logstore.FollowSpec) (Follower, error)
	// Live calls fn for each transient event of the session, one at a
	// time, on the subscription's own goroutine; events that arrive while
	// more than pendingBytes wait for fn are dropped and counted
	// (LiveSub.Dropped): the watch ends its streams as slow then.
	Live(sessionID string, pendingBytes int, fn func(logstore.LiveMsg)) (LiveSub, error)
}

// logReads is the part of Log that *logstore.Store satisfies as it is
// (its follower and its subscription are its own types: LogOf).
type logReads interface {
	// Tail is the session's last event as the log holds it now: its seq
	// and stream seq (Exists false: no session); a last message that is
	// not the session's event is refused. known and the exports read it
	// before they read the session.
	Tail(ctx context.Context, sessionID string) (logstore.Tail, error)
	// TailPosition is where the session's last message is, with its
	// verdict: Tail's answer and nil when it is the session's event,
	// else its position (its stream seq, and the seq it claims) and the
	// *logstore.UnreadableError Tail refuses it with. A watch starts
	// there, and ends at an unreadable last message (startFollow).
	TailPosition(ctx context.Context, sessionID string) (logstore.Tail, *logstore.UnreadableError, error)
	// Locate is the session's stream and subject, without reading the
	// log: where a follow starts and where MsgAt reads.
	Locate(sessionID string) (logstore.Location, error)
	// ReadSession calls fn for each stored message of the session after
	// stream seq afterStreamSeq, in order, up to the tail when the read
	// began, which it returns; fn may return logstore.ErrStop to end it
	// (/events, /context past the views, and an ACP afterEventId).
	ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error)
	// MsgAt is the message at a stream seq the views index (nil: it is
	// gone): the events of a page, a search hit's snippet.
	MsgAt(ctx context.Context, stream string, seq uint64) (*logstore.Msg, error)
	// ErasureOf is the session's erasure record (nil: never erased): an
	// erased session's answer names an erase under way, and its progress.
	ErasureOf(ctx context.Context, sessionID string) (*logstore.Erasure, uint64, error)
	// AuditRecords are the audit records after position after, at most
	// limit, oldest first, and where the next page starts (/v1/audit and
	// the tenants' audit index).
	AuditRecords(ctx context.Context, after uint64, limit int) ([]api.AuditRecord, uint64, error)
}

// Follower is a follow of a stream (Log.Follow), read a page at a time.
type Follower interface {
	// Fetch pulls the next page, waiting up to wait for its messages;
	// the next pull is made only when the reader asks for it, so a slow
	// reader holds one page.
	Fetch(wait time.Duration) (Page, error)
	// Close ends the follow (from any goroutine).
	Close()
}

// Page is one pull of a Follower.
type Page interface {
	// Messages yields the page's messages in stream order as they
	// arrive.
	Messages() iter.Seq[*logstore.Msg]
	// Err is why the page ended early, if it did (after Messages): the
	// follow waits before the next pull when a page failed empty.
	Err() error
}

// LiveSub is a subscription to a session's transient events (Log.Live).
type LiveSub interface {
	// Dropped is how many events were dropped for a slow fn so far.
	Dropped() int
	// Close ends the subscription.
	Close() error
}

var _ Log = LogOf((*logstore.Store)(nil))

// LogOf is l as the HTTP side reads it: a log whose Follow and Live give
// a follower (with its pages) and a subscription of its own types, as
// *logstore.Store's and internal/memlog's do.
func LogOf[F fetcher[P], P Page, L LiveSub](l interface {
	logReads
	Follow(ctx context.Context, spec logstore.FollowSpec) (F, error)
	Live(sessionID string, pendingBytes int, fn func(logstore.LiveMsg)) (L, error)
}) Log {
	return logOf[F, P, L]{logReads: l, follow: l.Follow, live: l.Live}
}

// fetcher is a Follower whose Fetch gives a page of its own type P.
type fetcher[P Page] interface {
	Fetch(wait time.Duration) (P, error)
	Close()
}

// logOf is LogOf's Log.
type logOf[F fetcher[P], P Page, L LiveSub] struct {
	logReads
	follow func(ctx context.Context, spec logstore.FollowSpec) (F, error)
	live   func(sessionID string, pendingBytes int, fn func(logstore.LiveMsg)) (L, error)
}

func (l logOf[F, P, L]) Follow(ctx context.Context, spec logstore.FollowSpec) (Follower, error) {
	f, err := l.follow(ctx, spec)
	if err != nil {
		return nil, err
	}
	return followerOf[F, P]{f}, nil
}

func (l logOf[F, P, L]) Live(sessionID string, pendingBytes int, fn func(logstore.LiveMsg)) (LiveSub, error) {
	sub, err := l.live(sessionID, pendingBytes, fn)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// followerOf is a fetcher as a Follower.
type followerOf[F fetcher[P], P Page] struct{ f F }

func (f followerOf[F, P]) Fetch(wait time.Duration) (Page, error) {
	p, err := f.f.Fetch(wait)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (f followerOf[F, P]) Close() { f.f.Close() }
