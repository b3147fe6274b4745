package logstore

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseChange is one change of a session's lease seen by a LeaseWatch.
type LeaseChange struct {
	SessionID string
	// Renewed: the lease was written (taken or renewed); otherwise it is
	// gone (deleted, or its TTL ran out and the server wrote a marker).
	Renewed bool
	// Ended: the lease was deleted (EndLease: a repairer ended it), not
	// expired.
	Ended bool
	// At is when the server stored the change.
	At time.Time
	// Revision of the change in the bucket.
	Revision uint64
}

// LeaseWatch follows the changes of every lease from the moment it is
// opened (no history, no values).
type LeaseWatch struct {
	w jetstream.KeyWatcher
}

// WatchLeases opens a LeaseWatch on SESSION_LEASES.
func (s *Store) WatchLeases(ctx context.Context) (*LeaseWatch, error) {
	w, err := s.kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	return &LeaseWatch{w: w}, nil
}

// Next waits for the next change. ok is false once the watch has closed
// (the server or the connection ended it: open a new one, and look again
// at what it may have missed) or ctx ended.
func (w *LeaseWatch) Next(ctx context.Context) (c LeaseChange, ok bool) {
	for {
		select {
		case <-ctx.Done():
			return LeaseChange{}, false
		case e, open := <-w.w.Updates():
			if !open {
				return LeaseChange{}, false
			}
			if e == nil {
				continue // the end of the (empty) initial values
			}
			switch e.Operation() {
			case jetstream.KeyValuePut:
				return LeaseChange{SessionID: e.Key(), Renewed: true, At: e.Created(), Revision: e.Revision()}, true
			case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
				// The server's expiry markers come as purges; a delete
				// is EndLease's.
				return LeaseChange{SessionID: e.Key(), Ended: e.Operation() == jetstream.KeyValueDelete, At: e.Created(), Revision: e.Revision()}, true
			}
		}
	}
}

// Stop ends the watch.
func (w *LeaseWatch) Stop() error { return w.w.Stop() }

// ClaimedSessions calls fn with the id of every session a holder has
// claimed (SESSION_CLAIMS), a page of keys pulled at a time and the next
// page only once fn has taken the last one: a caller that makes fn wait
// holds at most a page, never the whole list, in memory (a key lister
// would buffer every key in the client).
func (s *Store) ClaimedSessions(ctx context.Context, fn func(sessionID string)) error {
	prefix := "$KV." + ClaimBucket + "."
	return s.eachLastPerSubject(ctx, "KV_"+ClaimBucket, prefix+">", func(m *Msg) error {
		if op := m.Header.Get(headerKVOperation); op == "DEL" || op == "PURGE" {
			return nil
		}
		if id, ok := strings.CutPrefix(m.Subject, prefix); ok {
			fn(id)
		}
		return nil
	})
}
