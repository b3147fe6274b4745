package logstore

import (
	"context"
	"fmt"
	"time"
)

// LeaseRecord is the last entry stored under a session's lease key, read
// from the bucket stream's leader. Unlike GetLease it also describes an
// absent lease: when it was deleted or expired, which the repairer needs
// to honour its grace period across its own restarts.
type LeaseRecord struct {
	// Lease is the value of a live entry; nil when the lease is absent.
	Lease *Lease
	// Revision of the entry (0 when the key has no entry at all).
	Revision uint64
	// Stored is the server's time of the entry: the last renewal of a live
	// lease, or when the deletion or expiry marker was written.
	Stored time.Time
	// TTL of a live entry (its Nats-TTL header; 0 if it has none).
	TTL time.Duration
	// Expired: the entry is an expiry marker (Nats-Marker-Reason MaxAge).
	Expired bool
}

// Live reports whether a lease entry is present. The server removes an
// entry once its TTL passes (with up to a few hundred ms of lag).
func (r LeaseRecord) Live() bool { return r.Lease != nil }

// ExpiresAt is when a live entry's TTL runs out (zero without a TTL).
func (r LeaseRecord) ExpiresAt() time.Time {
	if r.Lease == nil || r.TTL <= 0 {
		return time.Time{}
	}
	return r.Stored.Add(r.TTL)
}

// Header names of KV entries and server markers.
const (
	headerKVOperation  = "KV-Operation"
	headerMarkerReason = "Nats-Marker-Reason"
	headerTTL          = "Nats-TTL"
)

// LeaseRecord reads the last entry of the session's lease key from the
// leader (never Direct Get: a replica may not have the latest renewal).
func (s *Store) LeaseRecord(ctx context.Context, sessionID string) (LeaseRecord, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return LeaseRecord{}, err
	}
	sm, h, err := s.msgGetStored(ctx, "KV_"+LeaseBucket, msgGetRequest{LastFor: "$KV." + LeaseBucket + "." + sessionID})
	if err != nil {
		return LeaseRecord{}, fmt.Errorf("logstore: lease record %s: %w", sessionID, err)
	}
	if sm == nil {
		return LeaseRecord{}, nil
	}
	rec := LeaseRecord{Revision: sm.Sequence, Stored: sm.Time}
	if op := h.Get(headerKVOperation); op != "" {
		return rec, nil // DEL or PURGE
	}
	if reason := h.Get(headerMarkerReason); reason != "" {
		rec.Expired = reason == "MaxAge"
		return rec, nil
	}
	if rec.Lease, err = s.leaseValue(ctx, sessionID, sm.Data); err != nil {
		return LeaseRecord{}, err
	}
	if v := h.Get(headerTTL); v != "" {
		rec.TTL = parseTTL(v)
	}
	return rec, nil
}

// parseTTL reads a Nats-TTL header: a Go duration ("30s") or seconds.
func parseTTL(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	var secs int64
	if _, err := fmt.Sscanf(v, "%d", &secs); err == nil {
		return time.Duration(secs) * time.Second
	}
	return 0
}
