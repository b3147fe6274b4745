package logstore

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseChange is one change of a session's lease seen by a LeaseWatch.
type LeaseChange struct {
	SessionID string
	// Renewed: the lease was written (taken or renewed); otherwise it is
	// gone (deleted, or its TTL ran out and the server wrote a marker).
	Renewed bool
	// At is when the server stored the change.
	At time.Time
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
				return LeaseChange{SessionID: e.Key(), Renewed: true, At: e.Created()}, true
			case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
				return LeaseChange{SessionID: e.Key(), At: e.Created()}, true
			}
		}
	}
}

// Stop ends the watch.
func (w *LeaseWatch) Stop() error { return w.w.Stop() }

// ClaimedSessions calls fn with the id of every session a holder has
// claimed (SESSION_CLAIMS), as the server lists them: one key at a time,
// never the whole list in memory.
func (s *Store) ClaimedSessions(ctx context.Context, fn func(sessionID string)) error {
	kl, err := s.claims.ListKeys(ctx)
	if err != nil {
		return err
	}
	defer kl.Stop()
	for k := range kl.Keys() {
		fn(k)
	}
	return ctx.Err()
}
