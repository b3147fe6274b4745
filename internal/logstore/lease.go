package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Lease is the value of a session's key in SESSION_LEASES.
type Lease struct {
	Holder    string    `json:"holder"`
	RenewedAt time.Time `json:"renewedAt"`
}

// Claim is the value of a session's key in SESSION_CLAIMS: a holder once
// claimed the session's liveness, so its lease expiry means it is gone.
type Claim struct {
	Holder    string    `json:"holder"`
	ClaimedAt time.Time `json:"claimedAt"`
}

// GetLease returns the live lease of a session, or nil.
func (s *Store) GetLease(ctx context.Context, sessionID string) (*Lease, uint64, error) {
	e, err := s.kv.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	l, err := s.leaseValue(ctx, sessionID, e.Value())
	if err != nil {
		return nil, 0, err
	}
	return l, e.Revision(), nil
}

// GetClaim returns the session's claim, or nil if no holder ever named it.
func (s *Store) GetClaim(ctx context.Context, sessionID string) (*Claim, error) {
	e, err := s.claims.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c Claim
	if err := s.decodeValue(ctx, ClaimBucket, "claim", sessionID, e.Value(), &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// LeaseHeldError refuses a lease to a holder while another holder's
// lease is live (DESIGN.md section 2). It unwraps to the contract's
// conflict code; its message names the current holder.
type LeaseHeldError struct {
	SessionID string
	// Holder is the current holder.
	Holder string
	// ExpiresAt is when its lease runs out unless renewed (zero: the
	// entry carries no TTL).
	ExpiresAt time.Time
}

func (e *LeaseHeldError) Error() string {
	until := ""
	if !e.ExpiresAt.IsZero() {
		until = " until " + e.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("session %s is held by %q (lease live%s): another holder is refused unless it says \"takeover\": true",
		e.SessionID, e.Holder, until)
}

// Unwrap gives the contract code: conflict.
func (e *LeaseHeldError) Unwrap() error {
	return &schema.Error{Code: schema.CodeConflict, Message: e.Error(), Index: -1}
}

// HeldByOther returns the refusal for holder if rec is a live lease of
// another holder at now, else nil. An entry whose TTL has run out counts
// as expired even before the server removes it: an expired lease may be
// taken by anyone.
func HeldByOther(sessionID string, rec LeaseRecord, holder string, now time.Time) *LeaseHeldError {
	if rec.Lease == nil || rec.Lease.Holder == holder {
		return nil
	}
	exp := rec.ExpiresAt()
	if !exp.IsZero() && !now.Before(exp) {
		return nil
	}
	return &LeaseHeldError{SessionID: sessionID, Holder: rec.Lease.Holder, ExpiresAt: exp}
}

// RenewLease takes or renews the session's lease for holder whoever holds
// it now: TakeLease with takeover (tools, tests, benchmarks).
func (s *Store) RenewLease(ctx context.Context, sessionID, holder string, now time.Time) error {
	return s.TakeLease(ctx, sessionID, holder, now, true)
}

// TakeLease takes or renews the session's lease for holder with the
// store's lease TTL, and records the claim when it takes the lease (not on
// a renewal). The claim is written before the lease: a lease never exists
// without its claim, so a holder that dies is always found by the
// repairer's sweep (the claim is its only durable trace). A claim whose
// lease write then fails is harmless: it names a session without a live
// lease, which is what the repairer looks for anyway. A live lease of
// another holder is refused with *LeaseHeldError unless takeover; an
// absent or expired one is taken. The check and the write are one step:
// the write expects the revision the check read, so two holders racing
// for a lease cannot both get it.
//
// kv.Update would drop the per-key TTL, so a renewal is a publish to the
// key's subject with the per-subject expected sequence and a message TTL.
func (s *Store) TakeLease(ctx context.Context, sessionID, holder string, now time.Time, takeover bool) error {
	if !schema.ValidSessionID(sessionID) {
		return schema.Errorf(schema.CodeBadRequest, "invalid session id")
	}
	if err := s.cannotStore(); err != nil {
		return fmt.Errorf("logstore: lease %s: %w", sessionID, err)
	}
	plain, _ := json.Marshal(Lease{Holder: holder, RenewedAt: now.UTC()})
	var val []byte
	ttl := s.cfg.LeaseTTL
	claimed := false
	for try := 0; try < 3; try++ {
		// The revision comes from the bucket's leader: kv.Get (and
		// kv.Create's own lookup) may be answered by a replica that has
		// not seen the last renewal, and on R3 after a fault that made
		// every retry fail the sequence check ("too much contention")
		// until the lease of a live holder expired.
		rec, err := s.LeaseRecord(ctx, sessionID)
		if err != nil {
			return err
		}
		if !takeover {
			if held := HeldByOther(sessionID, rec, holder, now); held != nil {
				return held
			}
		}
		if val == nil {
			// Sealed after the first read: a lease whose key an erase
			// destroyed reads as erased there, before a new key is made.
			if val, err = s.sealValue(ctx, LeaseBucket, sessionID, plain); err != nil {
				return fmt.Errorf("logstore: lease %s: %w", sessionID, err)
			}
		}
		if rec.Lease == nil && !claimed {
			// Taken (not renewed): the claim first. Written after the
			// lease, a claim that failed (an outage of its bucket) left a
			// lease without one, and every renewal after it found a lease
			// and wrote none: the session was never repaired.
			c, err := s.claimValue(ctx, sessionID, holder, now)
			if err == nil {
				_, err = s.claims.Put(ctx, sessionID, c)
			}
			if err != nil {
				return fmt.Errorf("logstore: claim %s: %w", sessionID, err)
			}
			claimed = true
		}
		_, err = s.js.Publish(ctx, "$KV."+LeaseBucket+"."+sessionID, val,
			jetstream.WithExpectLastSequencePerSubject(rec.Revision), jetstream.WithMsgTTL(ttl))
		if err == nil {
			return nil
		}
		if classify(err) == wrongSeq {
			continue
		}
		return fmt.Errorf("logstore: renew lease %s: %w", sessionID, err)
	}
	return fmt.Errorf("logstore: lease %s: too much contention", sessionID)
}

// leaseMarkerTTL is how long a lease's delete markers stay: the server's
// expiry markers (the bucket's LimitMarkerTTL) and EndLease's alike.
const leaseMarkerTTL = time.Hour

// ErrLeaseChanged: the lease key was written after the revision a caller
// expected (a holder renewed or took it, or the server wrote its expiry
// marker).
var ErrLeaseChanged = errors.New("logstore: lease changed since it was read")

// EndLease deletes the session's lease if its key's last entry is still
// revision (0: the key has no entry at all), else returns ErrLeaseChanged.
// The repairer ends a lease it found lapsed this way before it commits a
// repair: a holder's renewal (a write expecting the revision it read) and
// the end are ordered by the bucket, so a holder that renews after the
// repairer's read wins and the repair is not made, and one that renews
// after the end takes a new lease (and claim) as after any repair. The
// delete marker expires with the bucket's limit markers (LimitMarkerTTL).
func (s *Store) EndLease(ctx context.Context, sessionID string, revision uint64) error {
	if err := ValidateSessionID(sessionID); err != nil {
		return err
	}
	if err := s.cannotStore(); err != nil {
		return fmt.Errorf("logstore: end lease %s: %w", sessionID, err)
	}
	m := nats.NewMsg("$KV." + LeaseBucket + "." + sessionID)
	m.Header.Set(headerKVOperation, "DEL")
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	_, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(revision), jetstream.WithMsgTTL(leaseMarkerTTL))
	if err == nil {
		return nil
	}
	if classify(err) == wrongSeq {
		return ErrLeaseChanged
	}
	return fmt.Errorf("logstore: end lease %s: %w", sessionID, err)
}

// leaseValue reads a stored lease value (opened, if sealed).
func (s *Store) leaseValue(ctx context.Context, sessionID string, value []byte) (*Lease, error) {
	var l Lease
	if err := s.decodeValue(ctx, LeaseBucket, "lease", sessionID, value, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// decodeValue decodes the JSON of bucket's key's stored value (opened,
// if sealed) into v; what names the value in an error.
func (s *Store) decodeValue(ctx context.Context, bucket, what, key string, value []byte, v any) error {
	plain, err := s.openValue(ctx, bucket, key, value)
	if err == nil {
		err = json.Unmarshal(plain, v)
	}
	if err != nil {
		return fmt.Errorf("logstore: %s %s: %w", what, key, err)
	}
	return nil
}

// claimValue is the claim of holder at now as the store writes it
// (sealed, if it seals).
func (s *Store) claimValue(ctx context.Context, sessionID, holder string, now time.Time) ([]byte, error) {
	c, _ := json.Marshal(Claim{Holder: holder, ClaimedAt: now.UTC()})
	return s.sealValue(ctx, ClaimBucket, sessionID, c)
}
