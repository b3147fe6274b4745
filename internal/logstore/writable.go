package logstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// peerActiveLimit: a replica the leader has not heard from for longer
// than this (four raft heartbeats) does not count toward its quorum.
const peerActiveLimit = 4 * time.Second

// DegradedError is Writable's answer when every stream has a leader that
// reaches a quorum, but some replica is not reached: the node it lives on
// is down or cut off, and holders connected to that node cannot write.
type DegradedError struct {
	Stream string
	Peers  []string // the replicas not reached
}

func (e *DegradedError) Error() string {
	return fmt.Sprintf("logstore: %s: replicas %v not reached (holders connected there cannot renew)", e.Stream, e.Peers)
}

// Writable asks the leader of every stream a lease holder's renewal needs
// (the session streams, the lease and the claim buckets) how it stands,
// and returns an error unless each has a leader that reaches a quorum of
// its replicas: what a holder needs to append and to renew its lease; a
// server that cannot store (Config.CannotStore: a full disk) is not
// writable either. It also returns each stream's leader, so a caller can notice a change of
// leader between two calls. When every stream is writable but some
// replica is not reached it returns the leaders and a *DegradedError (the
// first such stream). It writes nothing.
func (s *Store) Writable(ctx context.Context) (leaders []string, err error) {
	if err := s.cannotStore(); err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	names := append(s.Streams(), "KV_"+LeaseBucket, "KV_"+ClaimBucket)
	leaders = make([]string, 0, len(names))
	var degraded *DegradedError
	for _, name := range names {
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			return leaders, fmt.Errorf("logstore: %s: %w", name, err)
		}
		ci := st.CachedInfo().Cluster
		if ci == nil {
			leaders = append(leaders, "")
			continue // a single server without clustering
		}
		if ci.Leader == "" {
			return leaders, fmt.Errorf("logstore: %s has no leader", name)
		}
		up := 1
		var missing []string
		for _, p := range ci.Replicas {
			if p != nil && !p.Offline && p.Active <= peerActiveLimit {
				up++
			} else if p != nil {
				missing = append(missing, p.Name)
			}
		}
		if n := 1 + len(ci.Replicas); up <= n/2 {
			return leaders, fmt.Errorf("logstore: %s: leader %s reaches %d of %d replicas", name, ci.Leader, up, n)
		}
		leaders = append(leaders, ci.Leader)
		if len(missing) > 0 && degraded == nil {
			degraded = &DegradedError{Stream: name, Peers: missing}
		}
	}
	if degraded != nil {
		return leaders, degraded
	}
	return leaders, nil
}

// Unreachable reports whether err is a failure to reach the log (no
// answer, no responders, no connection, no stream leader) rather than an
// answer about what was asked.
func Unreachable(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, jetstream.ErrNoStreamResponse):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503
	}
	return false
}

// WhileUnreachable calls fn until it returns an error Unreachable does not
// name, waiting between calls (RetryWhile), or until ctx ends: a read
// that a leader election or a restarting node answers with "JetStream
// system temporarily unavailable", or leaves unanswered, is asked again,
// not taken for the answer. onWait, if set, is called with the
// unreachable answer before each wait (to log it). Each call has its own
// deadline, at most attempt long: a request sent while no node could
// answer it is not waited on to ctx's end (attempt 0: no deadline but
// ctx's). A closed connection never comes back and is returned at once.
// When ctx ends it returns fn's last answer.
func WhileUnreachable[T any](ctx context.Context, attempt time.Duration, onWait func(err error), fn func(ctx context.Context) (T, error)) (T, error) {
	return RetryWhile(ctx, attempt, func(err error) bool {
		return Unreachable(err) && !errors.Is(err, nats.ErrConnectionClosed)
	}, onWait, fn)
}

// RetryWhile calls fn until it returns nil or an error retry does not
// take, or until ctx ends, waiting 100 ms between calls, doubling to 2 s;
// onWait, if set, is called with the error before each wait. Each call
// has its own deadline, at most attempt long (0: none but ctx's). When
// ctx ends it returns fn's last answer.
func RetryWhile[T any](ctx context.Context, attempt time.Duration, retry func(err error) bool, onWait func(err error), fn func(ctx context.Context) (T, error)) (T, error) {
	for n := 0; ; n++ {
		actx, cancel := ctx, func() {}
		if attempt > 0 {
			actx, cancel = context.WithTimeout(ctx, attempt)
		}
		v, err := fn(actx)
		cancel()
		if err == nil || !retry(err) || ctx.Err() != nil {
			return v, err
		}
		if onWait != nil {
			onWait(err)
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(min(100*time.Millisecond<<min(n, 5), 2*time.Second)):
		}
	}
}
