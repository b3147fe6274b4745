package logstore

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Counting around the writer (ADR 010, "Per-tenant limits"). The writer
// counts what its appends store (services/writer/usage.go); every other
// path that appends to the log itself counts here, in the same bucket by
// the same compare-and-set (AddUsage): the forker's children and the
// import of an export (ReserveStored, CountUsage), the repairer's repair
// events (UsageCounter).

// ReserveStored counts a session a path around the writer is about to
// create for tenant (a fork child, an imported session) under the bounds
// the writers recorded (UsageLimits), or refuses it quota_exceeded: the
// tenant's sessions at their bound, or its stored bytes at their bound or
// past it with the n bytes the session will store (0: not known yet).
// what says what is not done ("no fork"). reserved is false when no bound
// applies (the session is counted once stored, with CountUsage); a
// reservation whose session is then not stored is given back with
// CountUsage (Sessions: -1).
func (s *Store) ReserveStored(ctx context.Context, tenant string, n int64, what string) (reserved bool, err error) {
	l, ok, err := s.UsageLimits(ctx)
	if err != nil {
		return false, schema.Errorf(schema.CodeNotCommitted, "reading the tenants' limits: %v: nothing stored, retry", err)
	}
	if !ok {
		return false, nil
	}
	if bound := l.For(tenant).Bytes; bound > 0 {
		u, err := s.UsageOf(ctx, tenant)
		if err != nil {
			return false, schema.Errorf(schema.CodeNotCommitted, "reading the tenant's usage: %v: nothing stored, retry", err)
		}
		if u.Bytes >= bound || u.Bytes+n > bound {
			return false, schema.Errorf(schema.CodeQuotaExceeded, "tenant %s stores %d bytes, its bound is %d (%s): %s, nothing stored; erase sessions to make room",
				tenant, u.Bytes, bound, l.FlagOf(tenant, "--tenant-max-bytes"), what)
		}
	}
	reserved, _, _, err = s.ReserveSession(ctx, l, tenant, 0)
	return reserved, err
}

// CountUsage adds d, stored around the writer, to the tenant's usage at
// once. A store without the usage bucket (of an older version) counts
// nothing and is no error.
func (s *Store) CountUsage(ctx context.Context, tenant string, d TenantUsage) error {
	if d == (TenantUsage{}) {
		return nil
	}
	_, _, err := s.AddUsage(ctx, tenant, d, nil)
	if errors.Is(err, ErrNoUsageBucket) {
		return nil
	}
	return err
}

// UsageCounter counts what a service stores around the writer and adds it
// to the bucket every interval, as the writer does its own: a repair pays
// no round trip to the bucket, and a burst of repairs of one tenant makes
// one compare-and-set an interval, not one each (which would lose rounds
// to each other). Until Run runs (a service used without it), Count adds
// at once.
type UsageCounter struct {
	st      UsageCounting
	log     *slog.Logger
	every   time.Duration
	mu      sync.Mutex
	running bool
	pending map[string]TenantUsage
}

// UsageCounting is what a UsageCounter adds through: a *Store, or a log
// of a service's tests that keeps the usage in memory.
type UsageCounting interface {
	CountUsage(ctx context.Context, tenant string, d TenantUsage) error
}

// NewUsageCounter returns a counter that adds to st's bucket every
// interval (default one second). A failure is logged on a *Store's
// logger (on another log, not at all).
func NewUsageCounter(st UsageCounting, every time.Duration) *UsageCounter {
	if every <= 0 {
		every = time.Second
	}
	log := slog.New(slog.DiscardHandler)
	if s, ok := st.(*Store); ok {
		log = s.log
	}
	return &UsageCounter{st: st, log: log, every: every, pending: map[string]TenantUsage{}}
}

// Count adds d to the tenant's usage: at the next flush while Run runs,
// else at once.
func (c *UsageCounter) Count(tenant string, d TenantUsage) {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		_ = c.add(context.Background(), tenant, d)
		return
	}
	p := c.pending[tenant]
	c.pending[tenant] = TenantUsage{Sessions: p.Sessions + d.Sessions, Bytes: p.Bytes + d.Bytes}
	c.mu.Unlock()
}

// Run flushes every interval until ctx ends, then once more on a context
// of its own (a service stopping keeps its count).
func (c *UsageCounter) Run(ctx context.Context) {
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.flush(context.WithoutCancel(ctx), true)
			return
		case <-t.C:
			c.flush(ctx, false)
		}
	}
}

// flush adds what was counted to the bucket; what could not be added is
// kept for the next flush (while Run runs), else logged and lost to the
// count (a recount puts it right). last: Run stops, and Count adds at
// once from now on.
func (c *UsageCounter) flush(ctx context.Context, last bool) {
	c.mu.Lock()
	out := c.pending
	c.pending = make(map[string]TenantUsage, len(out))
	c.running = !last
	c.mu.Unlock()
	for tenant, d := range out {
		if err := c.add(ctx, tenant, d); err != nil && !last {
			c.Count(tenant, d)
		}
	}
}

// add adds d to the bucket within 10 s; a failure is logged.
func (c *UsageCounter) add(ctx context.Context, tenant string, d TenantUsage) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.st.CountUsage(ctx, tenant, d)
	if err != nil {
		c.log.Warn("logstore: counting in a tenant's usage", "tenant", tenant, "sessions", d.Sessions, "bytes", d.Bytes, "err", err)
	}
	return err
}
