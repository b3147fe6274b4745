package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// UsageBucket holds each tenant's usage (ADR 010, "Per-tenant limits"):
// key <tenant> (the NATS account), value a TenantUsage. Every writer
// changes it only by compare-and-set on the key's revision, so that
// writers never overwrite each other's counts, and watches it to learn
// the others'.
const UsageBucket = "TENANT_USAGE"

// limitsKey holds the limits the writers were last started with
// (TenantLimits), for the operator's view; tenant keys never begin with
// '_' (tenant names hold none).
const limitsKey = "_limits"

// TenantLimits are the writers' bounds per tenant (0: none), as the last
// writer started recorded them: Sessions and Bytes for every tenant but
// those Tenants names.
type TenantLimits struct {
	Sessions        int64                  `json:"sessions"`
	Bytes           int64                  `json:"bytes"`
	EventsPerSecond float64                `json:"eventsPerSecond"`
	Tenants         map[string]TenantBound `json:"tenants,omitempty"`
}

// TenantBound bounds one tenant's sessions and stored bytes (0: none),
// and, when EventsPerSecond is set, its events per second (0: none; nil:
// the rate of every tenant, TenantLimits.EventsPerSecond).
type TenantBound struct {
	Sessions        int64    `json:"sessions"`
	Bytes           int64    `json:"bytes"`
	EventsPerSecond *float64 `json:"eventsPerSecond,omitempty"`
}

// For returns the bounds of tenant.
func (l TenantLimits) For(tenant string) TenantBound {
	if b, ok := l.Tenants[tenant]; ok {
		return b
	}
	return TenantBound{Sessions: l.Sessions, Bytes: l.Bytes}
}

// RateOf returns the events per second tenant's agents may append (0:
// no bound): its own --tenant-limit's, else the one of every tenant.
func (l TenantLimits) RateOf(tenant string) float64 {
	if b, ok := l.Tenants[tenant]; ok && b.EventsPerSecond != nil {
		return *b.EventsPerSecond
	}
	return l.EventsPerSecond
}

// RateFlagOf names the setting that bounds tenant's events per second.
func (l TenantLimits) RateFlagOf(tenant string) string {
	if b, ok := l.Tenants[tenant]; ok && b.EventsPerSecond != nil {
		return "--tenant-limit " + tenant
	}
	return "--tenant-events-per-second"
}

// FlagOf names the setting that bounds tenant: its own --tenant-limit,
// else flag, the one of every tenant.
func (l TenantLimits) FlagOf(tenant, flag string) string {
	if _, ok := l.Tenants[tenant]; ok {
		return "--tenant-limit " + tenant
	}
	return flag
}

// UsageTenant is the tenant a stored session id is counted for (ADR 010):
// the tenant of its prefix, else the default tenant.
func UsageTenant(storedID string) string {
	if t, _ := api.WireOf(storedID); t != "" {
		return t
	}
	return api.DefaultTenant
}

// ReserveSession counts a session an agent of tenant is about to create
// in the bucket, by compare-and-set, or refuses it quota_exceeded when the
// bucket's count plus local (what the caller counted and has not added
// yet) reaches the tenant's session bound in l (0: no bound, and nothing
// is done: reserved is false). A reservation of a session that is then
// not stored is given back with AddUsage (Sessions: -1).
func (s *Store) ReserveSession(ctx context.Context, l TenantLimits, tenant string, local int64) (reserved bool, after TenantUsage, rev uint64, err error) {
	bound := l.For(tenant).Sessions
	if bound <= 0 {
		return false, TenantUsage{}, 0, nil
	}
	var full error
	after, rev, err = s.AddUsage(ctx, tenant, TenantUsage{Sessions: 1}, func(cur TenantUsage) error {
		if n := cur.Sessions + local; n >= bound {
			full = schema.Errorf(schema.CodeQuotaExceeded, "tenant %s has %d sessions, its bound is %d (%s): no session created, nothing stored; erase sessions to make room",
				tenant, n, bound, l.FlagOf(tenant, "--tenant-max-sessions"))
			return full
		}
		return nil
	})
	if full != nil {
		return false, TenantUsage{}, 0, full
	}
	if err != nil {
		return false, TenantUsage{}, 0, schema.Errorf(schema.CodeNotCommitted, "counting the session in the tenant's usage: %v: nothing stored, retry", err)
	}
	return true, after, rev, nil
}

// PutUsageLimits records the limits a writer starts with.
func (s *Store) PutUsageLimits(ctx context.Context, l TenantLimits) error {
	kv, err := s.usageKV(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(l)
	if _, err := kv.Put(ctx, limitsKey, b); err != nil {
		return fmt.Errorf("logstore: usage limits: %w", err)
	}
	return nil
}

// UsageLimits reads the limits the last writer started recorded; ok is
// false when none did.
func (s *Store) UsageLimits(ctx context.Context) (l TenantLimits, ok bool, err error) {
	kv, err := s.usageKV(ctx)
	if errors.Is(err, ErrNoUsageBucket) {
		return l, false, nil // a store no writer of this version provisioned
	}
	if err != nil {
		return l, false, err
	}
	e, err := kv.Get(ctx, limitsKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("logstore: usage limits: %w", err)
	}
	return l, true, json.Unmarshal(e.Value(), &l)
}

// TenantUsage is what a tenant's sessions hold: how many sessions, and
// the bytes of their stored events (the messages' bodies, as an erase
// reads them).
type TenantUsage struct {
	Sessions int64 `json:"sessions"`
	Bytes    int64 `json:"bytes"`
}

// Add returns u plus d, never below zero: a give-back of what was never
// counted (sessions stored before the usage was kept) floors at nothing.
func (u TenantUsage) Add(d TenantUsage) TenantUsage {
	return TenantUsage{Sessions: max(u.Sessions+d.Sessions, 0), Bytes: max(u.Bytes+d.Bytes, 0)}
}

// ErrNoUsageBucket: the store has no UsageBucket (provisioned by a store
// of an older version, opened without provisioning).
var ErrNoUsageBucket = errors.New("logstore: no bucket " + UsageBucket)

// usageCASRounds bounds the compare-and-set rounds of one AddUsage: each
// lost round means another writer's update landed, so the bound is only
// reached under a storm of them.
const usageCASRounds = 100

func (s *Store) provisionUsage(ctx context.Context) error {
	return s.provisionKV(ctx, UsageBucket, "sessionlog writer: usage per tenant (key = tenant, value = sessions and stored bytes)")
}

func (s *Store) usageKV(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.usage.open(ctx, s.js, UsageBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrNoUsageBucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", UsageBucket, err)
	}
	return kv, nil
}

func decodeUsage(tenant string, b []byte) (TenantUsage, error) {
	var u TenantUsage
	if err := json.Unmarshal(b, &u); err != nil {
		return u, fmt.Errorf("logstore: usage of tenant %s: %w", tenant, err)
	}
	return u, nil
}

// UsageOf reads a tenant's usage (zero when it has none) from the
// bucket's leader.
func (s *Store) UsageOf(ctx context.Context, tenant string) (TenantUsage, error) {
	u, _, err := s.usageAt(ctx, tenant)
	return u, err
}

func (s *Store) usageAt(ctx context.Context, tenant string) (TenantUsage, uint64, error) {
	v, rev, err := s.usageValueAt(ctx, tenant)
	return v.TenantUsage, rev, err
}

// usageValue is a tenant's value in UsageBucket: its usage, and the
// sessions whose erase gave their usage back (GiveBackErased) and whose
// job has not yet said so in its record (ForgetGiveBack).
type usageValue struct {
	TenantUsage
	GivenBack []string `json:"givenBack,omitempty"`
}

func (s *Store) usageValueAt(ctx context.Context, tenant string) (usageValue, uint64, error) {
	m, err := s.msgGet(ctx, "KV_"+UsageBucket, msgGetRequest{LastFor: "$KV." + UsageBucket + "." + tenant})
	if isStreamNotFound(err) || err == nil && m == nil {
		return usageValue{}, 0, nil
	}
	if err != nil {
		return usageValue{}, 0, fmt.Errorf("logstore: usage of tenant %s: %w", tenant, err)
	}
	if m.Header.Get(headerKVOperation) != "" {
		// Deleted or purged: a create would fail on the marker, an
		// update after it does not.
		return usageValue{}, m.StreamSeq, nil
	}
	var v usageValue
	if err := json.Unmarshal(m.Data, &v); err != nil {
		return v, m.StreamSeq, fmt.Errorf("logstore: usage of tenant %s: %w", tenant, err)
	}
	return v, m.StreamSeq, nil
}

// AddUsage adds d to the tenant's usage by compare-and-set, read from the
// bucket's leader, and returns the usage after it and its revision.
// check, when given, sees the usage before d and may refuse it: its error
// is returned and nothing is written.
func (s *Store) AddUsage(ctx context.Context, tenant string, d TenantUsage, check func(TenantUsage) error) (TenantUsage, uint64, error) {
	v, rev, err := s.changeUsage(ctx, tenant, func(v *usageValue) (bool, error) {
		if check != nil {
			if err := check(v.TenantUsage); err != nil {
				return false, err
			}
		}
		v.TenantUsage = v.Add(d)
		return true, nil
	})
	return v.TenantUsage, rev, err
}

// GiveBackErased takes d (negative: the session and its bytes) off the
// usage of the erased session id's tenant, once: the same compare-and-set
// names id in the value's GivenBack, and a repeat that finds it there
// changes nothing (given is false). The erase job says so in its record,
// then calls ForgetGiveBack. So a job cut between its give-back and its
// record, and resumed, gives back once (ADR 010, "Per-tenant limits").
func (s *Store) GiveBackErased(ctx context.Context, id string, d TenantUsage) (given bool, err error) {
	_, _, err = s.changeUsage(ctx, UsageTenant(id), func(v *usageValue) (bool, error) {
		if slices.Contains(v.GivenBack, id) {
			return false, nil
		}
		v.TenantUsage, v.GivenBack = v.Add(d), append(v.GivenBack, id)
		given = true
		return true, nil
	})
	return given, err
}

// ForgetGiveBack drops id from its tenant's GivenBack, once the erase
// job's record has left the phase that gives back (a repeat finds nothing
// to drop and writes nothing).
func (s *Store) ForgetGiveBack(ctx context.Context, id string) error {
	_, _, err := s.changeUsage(ctx, UsageTenant(id), func(v *usageValue) (bool, error) {
		i := slices.Index(v.GivenBack, id)
		if i < 0 {
			return false, nil
		}
		v.GivenBack = slices.Delete(v.GivenBack, i, i+1)
		return true, nil
	})
	return err
}

// changeUsage changes the tenant's value by compare-and-set, read from the
// bucket's leader, again when another writer's update landed first, and
// returns the value after it and its revision. change returns false to
// write nothing (the value read is returned), or an error, returned with
// nothing written.
func (s *Store) changeUsage(ctx context.Context, tenant string, change func(*usageValue) (bool, error)) (usageValue, uint64, error) {
	kv, err := s.usageKV(ctx)
	if err != nil {
		return usageValue{}, 0, err
	}
	for range usageCASRounds {
		v, rev, err := s.usageValueAt(ctx, tenant)
		if err != nil {
			return usageValue{}, 0, err
		}
		write, err := change(&v)
		if err != nil || !write {
			return v, rev, err
		}
		b, _ := json.Marshal(v)
		var nrev uint64
		if rev == 0 {
			nrev, err = kv.Create(ctx, tenant, b)
		} else {
			nrev, err = kv.Update(ctx, tenant, b, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // another writer's update landed first
		}
		if err != nil {
			return usageValue{}, 0, fmt.Errorf("logstore: usage of tenant %s: %w", tenant, err)
		}
		return v, nrev, nil
	}
	return usageValue{}, 0, fmt.Errorf("logstore: usage of tenant %s: %d compare-and-set rounds lost to other writers", tenant, usageCASRounds)
}

// ListUsage reads every tenant's usage.
func (s *Store) ListUsage(ctx context.Context) (map[string]TenantUsage, error) {
	out := map[string]TenantUsage{}
	err := s.WatchUsage(ctx, func(tenant string, u TenantUsage, _ uint64) {
		out[tenant] = u
	}, true)
	if errors.Is(err, ErrNoUsageBucket) {
		return out, nil // a store no writer of this version provisioned
	}
	return out, err
}

// WatchUsage calls fn with every tenant's usage and its revision, then
// (unless once) with each update until ctx ends; it returns once the
// current values are delivered, the watch going on in the background. fn
// runs on one goroutine at a time.
func (s *Store) WatchUsage(ctx context.Context, fn func(tenant string, u TenantUsage, rev uint64), once bool) error {
	kv, err := s.usageKV(ctx)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("logstore: watch %s: %w", UsageBucket, err)
	}
	deliver := func(e jetstream.KeyValueEntry) {
		if strings.HasPrefix(e.Key(), "_") {
			return // _limits and the like: no tenant's
		}
		if u, err := decodeUsage(e.Key(), e.Value()); err == nil {
			fn(e.Key(), u, e.Revision())
		} else {
			s.log.Warn("logstore: usage record does not decode", "tenant", e.Key(), "err", err)
		}
	}
	for e := range w.Updates() {
		if e == nil {
			break // the current values are delivered
		}
		deliver(e)
	}
	if once || ctx.Err() != nil {
		return w.Stop()
	}
	go func() {
		for e := range w.Updates() {
			if e != nil {
				deliver(e)
			}
		}
	}()
	go func() {
		<-ctx.Done()
		_ = w.Stop()
	}()
	return nil
}
