package logstore

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Counting (ADR 010, "Per-tenant limits"). The writer counts what its
// appends store with a UsageCounter (services/writer/usage.go); every
// other path that appends to the log itself counts here too, in the same
// bucket by the same compare-and-set (AddUsage): the forker's children
// and the import of an export (ReserveStored, CountUsage), the
// repairer's repair events (UsageCounter).

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

// UsageCounter counts what a service stores and adds it to the bucket
// every interval, by compare-and-set (AddUsage): the writer counts its
// appends with one, and the repairer its repair events, around the
// writer. An append or a repair pays no round trip to the bucket, and a
// burst of them for one tenant makes one compare-and-set an interval,
// not one each (which would lose rounds to each other). Until Run runs (a
// service used without it), Count adds at once, unless the counter was
// made with UsageCounterOptions.Deferred.
type UsageCounter struct {
	st       UsageCounting
	log      *slog.Logger
	o        UsageCounterOptions
	kick     chan struct{}
	mu       sync.Mutex
	running  bool
	pending  map[string]TenantUsage // counted, not flushed yet
	flushing map[string]TenantUsage // being added to the bucket
}

// UsageCounterOptions shape a UsageCounter.
type UsageCounterOptions struct {
	// Every is the interval of the flushes (default one second).
	Every time.Duration
	// FlushBytes: a tenant's bytes counted and not flushed that make the
	// counter flush at once rather than at its next interval (0: none).
	FlushBytes int64
	// Deferred: counts wait for Run's flushes from the start (Run must
	// run), rather than being added at once until it does.
	Deferred bool
	// Added, when set, is called with the bucket's value after each add
	// that landed and its revision, before the add leaves Local (so Local
	// plus what Added reported never misses it). It needs a counting
	// log that adds with AddUsage, as a *Store does.
	Added func(tenant string, after TenantUsage, rev uint64)
}

// UsageCounting is what a UsageCounter adds through: a *Store, or a log
// of a service's tests that keeps the usage in memory.
type UsageCounting interface {
	CountUsage(ctx context.Context, tenant string, d TenantUsage) error
}

// usageAdding is a UsageCounting that reports the value after an add
// (UsageCounterOptions.Added).
type usageAdding interface {
	AddUsage(ctx context.Context, tenant string, d TenantUsage, check func(TenantUsage) error) (TenantUsage, uint64, error)
}

// NewUsageCounter returns a counter that adds to st's bucket every
// interval (default one second). A failure is logged on a *Store's
// logger (on another log, not at all).
func NewUsageCounter(st UsageCounting, every time.Duration) *UsageCounter {
	return NewUsageCounterWith(st, UsageCounterOptions{Every: every})
}

// NewUsageCounterWith returns a counter shaped by o.
func NewUsageCounterWith(st UsageCounting, o UsageCounterOptions) *UsageCounter {
	if o.Every <= 0 {
		o.Every = time.Second
	}
	log := slog.New(slog.DiscardHandler)
	if s, ok := st.(*Store); ok && s != nil {
		log = s.log
	}
	return &UsageCounter{st: st, log: log, o: o, kick: make(chan struct{}, 1), running: o.Deferred,
		pending: map[string]TenantUsage{}, flushing: map[string]TenantUsage{}}
}

// Count adds d to the tenant's usage: at the next flush while Run runs
// (at once past FlushBytes), else at once.
func (c *UsageCounter) Count(tenant string, d TenantUsage) {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		_ = c.add(context.Background(), tenant, d)
		return
	}
	p := c.pending[tenant]
	p = TenantUsage{Sessions: p.Sessions + d.Sessions, Bytes: p.Bytes + d.Bytes}
	c.pending[tenant] = p
	c.mu.Unlock()
	if c.o.FlushBytes > 0 && p.Bytes >= c.o.FlushBytes {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// Local is what was counted for tenant that the bucket may not hold yet:
// not flushed, or being flushed.
func (c *UsageCounter) Local(tenant string) TenantUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, f := c.pending[tenant], c.flushing[tenant]
	return TenantUsage{Sessions: p.Sessions + f.Sessions, Bytes: p.Bytes + f.Bytes}
}

// Tenants lists the tenants Local has a count for.
func (c *UsageCounter) Tenants() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pending)+len(c.flushing))
	for t := range c.pending {
		out = append(out, t)
	}
	for t := range c.flushing {
		if _, ok := c.pending[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

// Run flushes every interval (and at once when a tenant's count passes
// FlushBytes) until ctx ends, then once more on a context of its own (a
// service stopping keeps its count).
func (c *UsageCounter) Run(ctx context.Context) {
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	t := time.NewTicker(c.o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.flush(context.WithoutCancel(ctx), true)
			return
		case <-t.C:
		case <-c.kick:
		}
		c.flush(ctx, false)
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
	for t, d := range out {
		c.flushing[t] = d
	}
	c.running = !last
	c.mu.Unlock()
	for tenant, d := range out {
		err := c.add(ctx, tenant, d)
		c.mu.Lock()
		delete(c.flushing, tenant)
		if err != nil && !last {
			p := c.pending[tenant]
			c.pending[tenant] = TenantUsage{Sessions: p.Sessions + d.Sessions, Bytes: p.Bytes + d.Bytes}
		}
		c.mu.Unlock()
	}
}

// add adds d to the bucket within 10 s (reporting the value after it to
// Added); a failure is logged.
func (c *UsageCounter) add(ctx context.Context, tenant string, d TenantUsage) error {
	if d == (TenantUsage{}) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	if a, ok := c.st.(usageAdding); ok && c.o.Added != nil {
		var after TenantUsage
		var rev uint64
		if after, rev, err = a.AddUsage(ctx, tenant, d, nil); err == nil {
			c.o.Added(tenant, after, rev)
		}
	} else {
		err = c.st.CountUsage(ctx, tenant, d)
	}
	if err != nil {
		c.log.Warn("logstore: counting in a tenant's usage", "tenant", tenant, "sessions", d.Sessions, "bytes", d.Bytes, "err", err)
	}
	return err
}
