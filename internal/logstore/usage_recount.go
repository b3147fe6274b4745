package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RecountUsage sets every tenant's usage in UsageBucket to what the
// session streams hold (sessions stored before the usage was kept, a
// bucket deleted or emptied, counts lost to a failure), and returns the
// usage it found in the streams.
//
// One recount runs at a time: it first takes the bucket's recount lock
// (key _recount, a lease of recountLease renewed as it walks), and
// refuses with ErrRecountRunning while another recount holds it; a lock
// not renewed within its lease (a recount killed) is taken over. Before
// its correction it renews the lock once more, and gives up if another
// took it over meanwhile.
//
// It reads the bucket's values first (before), then walks each stream up
// to its last message at that moment (the cut), headers only, a page at
// a time: a session's bytes are the sizes of its messages' bodies, and a
// session is counted at its first event (seq 1). Then it adds found minus
// before to each tenant with AddUsage, the compare-and-set every writer
// uses: what the writers added while the walk ran is kept on top of what
// was found, and a writer's update that lands between the read and the
// write of the correction makes it read again. No count is lost; what
// was stored before the cut and added to the bucket only after the
// recount read it (a writer's counts not flushed yet, at most one flush
// interval of appends; a fork or import in flight) counts twice, so a
// recount under load may read high by that much, and one in a quiet
// moment is exact. An erase in flight may make it read low (ADR 010,
// "Recount").
func (s *Store) RecountUsage(ctx context.Context) (found map[string]TenantUsage, err error) {
	if err := s.provisionUsage(ctx); err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", UsageBucket, err)
	}
	lock, err := s.lockRecount(ctx)
	if err != nil {
		return nil, err
	}
	defer lock.release(ctx)
	before, err := s.ListUsage(ctx)
	if err != nil {
		return nil, err
	}
	found = map[string]TenantUsage{}
	for _, name := range s.Streams() {
		if err := s.countStream(ctx, name, found, lock.renewDue); err != nil {
			return nil, fmt.Errorf("logstore: recount stream %s: %w", name, err)
		}
	}
	if recountWalked != nil {
		recountWalked()
	}
	if err := lock.renew(ctx); err != nil {
		return nil, err
	}
	tenants := map[string]struct{}{}
	for t := range found {
		tenants[t] = struct{}{}
	}
	for t := range before {
		tenants[t] = struct{}{}
	}
	for t := range tenants {
		f, b := found[t], before[t]
		d := TenantUsage{Sessions: f.Sessions - b.Sessions, Bytes: f.Bytes - b.Bytes}
		if d == (TenantUsage{}) {
			continue
		}
		if _, _, err := s.AddUsage(ctx, t, d, nil); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// recountWalked, when a test sets it, runs between a recount's walk and
// its correction.
var recountWalked func()

// recountKey is the key of the recount lock in UsageBucket (a key that
// begins with '_' is no tenant's).
const recountKey = "_recount"

// recountLease is how long a recount's lock holds unless renewed; the
// recount renews it every third of that as it walks.
const recountLease = time.Minute

// ErrRecountRunning: another recount holds the recount lock.
var ErrRecountRunning = errors.New("logstore: another recount is running")

// recountLock is the value of recountKey, and the lock a recount holds.
type recountLock struct {
	Holder  string    `json:"holder"`
	Started time.Time `json:"started"`
	Until   time.Time `json:"until"`

	kv      jetstream.KeyValue
	rev     uint64
	renewed time.Time
}

// lockRecount takes the recount lock, or a lock whose lease ran out.
func (s *Store) lockRecount(ctx context.Context) (*recountLock, error) {
	kv, err := s.usageKV(ctx)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	now := time.Now()
	l := &recountLock{Holder: fmt.Sprintf("%s pid %d", host, os.Getpid()), Started: now.UTC(), Until: now.Add(recountLease).UTC(), kv: kv, renewed: now}
	b, _ := json.Marshal(l)
	if l.rev, err = kv.Create(ctx, recountKey, b); err == nil {
		return l, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("logstore: recount lock: %w", err)
	}
	e, err := kv.Get(ctx, recountKey)
	if err != nil {
		return nil, fmt.Errorf("logstore: recount lock: %w", err)
	}
	var held recountLock
	if json.Unmarshal(e.Value(), &held) == nil && now.Before(held.Until) {
		return nil, fmt.Errorf("%w: %s holds the lock since %s, until %s unless it renews it; run one recount at a time",
			ErrRecountRunning, held.Holder, held.Started.Format(time.RFC3339), held.Until.Format(time.RFC3339))
	}
	// Its holder stopped renewing it (killed): take it over.
	if l.rev, err = kv.Update(ctx, recountKey, b, e.Revision()); errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("%w: another took over the lease that ran out", ErrRecountRunning)
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: recount lock: %w", err)
	}
	return l, nil
}

// renewDue renews the lock when a third of its lease has gone by since
// it was last written.
func (l *recountLock) renewDue(ctx context.Context) error {
	if time.Since(l.renewed) < recountLease/3 {
		return nil
	}
	return l.renew(ctx)
}

// renew writes the lock again over the revision this recount wrote, and
// fails when another recount took it over.
func (l *recountLock) renew(ctx context.Context) error {
	now := time.Now()
	l.Until = now.Add(recountLease).UTC()
	b, _ := json.Marshal(l)
	rev, err := l.kv.Update(ctx, recountKey, b, l.rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: it took over this recount's lock (this one ran past its lease): nothing corrected", ErrRecountRunning)
	}
	if err != nil {
		return fmt.Errorf("logstore: recount lock: %w", err)
	}
	l.rev, l.renewed = rev, now
	return nil
}

// release deletes the lock unless another recount took it over.
func (l *recountLock) release(ctx context.Context) {
	_ = l.kv.Delete(context.WithoutCancel(ctx), recountKey, jetstream.LastRevision(l.rev))
}

// countStream adds the sessions and bytes of stream's session subjects
// up to its last message now to found; renew runs at every message (the
// recount's lock, renewed when due).
func (s *Store) countStream(ctx context.Context, stream string, found map[string]TenantUsage, renew func(context.Context) error) error {
	return s.walk(ctx, FollowSpec{Stream: stream, PageEvents: lastPage, headersOnly: true}, true, func(m *Msg) error {
		if err := renew(ctx); err != nil {
			return err
		}
		id, ok := SessionFromSubject(m.Subject)
		if !ok {
			return nil
		}
		size, err := strconv.Atoi(m.Header.Get(nats.MsgSize))
		if err != nil {
			return fmt.Errorf("message %d of session %s: no body size (%s): %w", m.StreamSeq, id, nats.MsgSize, err)
		}
		t := UsageTenant(id)
		u := found[t]
		if Sealed(m.Header) {
			// The body as written, as the appends counted it.
			size -= SealOverhead
		}
		u.Bytes += int64(size)
		if m.Header.Get(HeaderSeq) == "1" {
			u.Sessions++
		}
		found[t] = u
		return nil
	})
}
