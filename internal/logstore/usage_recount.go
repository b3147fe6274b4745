package logstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// RecountUsage sets every tenant's usage in UsageBucket to what the
// session streams hold (sessions stored before the usage was kept, a
// bucket deleted or emptied, counts lost to a failure), and returns the
// usage it found in the streams.
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
// recount under load may read high by that much, never low, and one in a
// quiet moment is exact.
func (s *Store) RecountUsage(ctx context.Context) (found map[string]TenantUsage, err error) {
	if err := s.provisionUsage(ctx); err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", UsageBucket, err)
	}
	before, err := s.ListUsage(ctx)
	if err != nil {
		return nil, err
	}
	found = map[string]TenantUsage{}
	for _, name := range s.Streams() {
		if err := s.countStream(ctx, name, found); err != nil {
			return nil, fmt.Errorf("logstore: recount stream %s: %w", name, err)
		}
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

// countStream adds the sessions and bytes of stream's session subjects
// up to its last message now to found.
func (s *Store) countStream(ctx context.Context, stream string, found map[string]TenantUsage) error {
	return s.walk(ctx, FollowSpec{Stream: stream, PageEvents: lastPage, headersOnly: true}, true, func(m *Msg) error {
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
		u.Bytes += int64(size)
		if m.Header.Get(HeaderSeq) == "1" {
			u.Sessions++
		}
		found[t] = u
		return nil
	})
}
