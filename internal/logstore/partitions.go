package logstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// The partition count is recorded in the store itself, in a small KV
// bucket, key "partitions", written with create-if-absent before any
// session stream exists: the first process that provisions a store decides
// its count atomically, even against a concurrent first start with another
// count (stream metadata could not decide that race: both processes would
// create their own streams). A store provisioned before the count was
// recorded has the stream SESSIONS and holds one partition.
const (
	LayoutBucket  = "SESSION_LAYOUT"
	partitionsKey = "partitions"
)

// PartitionsError is a process started with another partition count than
// the store holds: sessions would move silently, so it must not start.
type PartitionsError struct {
	Recorded, Asked int
}

func (e *PartitionsError) Error() string {
	return fmt.Sprintf("logstore: the store holds %d partition(s), this process was started with --partitions %d (start it with --partitions %d)", e.Recorded, e.Asked, e.Recorded)
}

// RecordedPartitions reads the partition count recorded in the store;
// ok is false when the store was never provisioned.
func (s *Store) RecordedPartitions(ctx context.Context) (p int, ok bool, err error) {
	kv, err := s.js.KeyValue(ctx, LayoutBucket)
	switch {
	case err == nil:
		e, err := kv.Get(ctx, partitionsKey)
		if err == nil {
			return parsePartitions(e.Value())
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, false, fmt.Errorf("logstore: read partitions: %w", err)
		}
	case !errors.Is(err, jetstream.ErrBucketNotFound):
		return 0, false, fmt.Errorf("logstore: bucket %s: %w", LayoutBucket, err)
	}
	if _, err := s.js.Stream(ctx, StreamName); err == nil {
		return 1, true, nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, false, fmt.Errorf("logstore: stream %s: %w", StreamName, err)
	}
	return 0, false, nil
}

func parsePartitions(v []byte) (int, bool, error) {
	p, err := strconv.Atoi(string(v))
	if err != nil || p < 1 || p > MaxPartitions {
		return 0, false, fmt.Errorf("logstore: recorded partitions %q is not a count", v)
	}
	return p, true, nil
}

// choosePartitions sets the store's layout: the configured count, which
// must be the recorded one, or the recorded one when none is configured.
func (s *Store) choosePartitions(ctx context.Context) error {
	p, ok, err := s.RecordedPartitions(ctx)
	if err != nil {
		return err
	}
	asked := s.cfg.Partitions
	switch {
	case asked == 0 && ok:
		asked = p
	case asked == 0:
		asked = 1
	case ok && p != asked:
		return &PartitionsError{Recorded: p, Asked: asked}
	}
	if s.layout, err = NewLayout(asked); err != nil {
		return err
	}
	s.cfg.Partitions = asked
	return nil
}

// recordPartitions records the count unless one is; a count recorded
// meanwhile by another process must be the same.
func (s *Store) recordPartitions(ctx context.Context) error {
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      LayoutBucket,
		Description: "sessionlog: the store's partition count (DESIGN.md section 11), written once",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("logstore: provision bucket %s: %w", LayoutBucket, err)
	}
	want := s.layout.Partitions()
	if _, err := kv.Create(ctx, partitionsKey, []byte(strconv.Itoa(want))); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("logstore: record partitions: %w", err)
	}
	e, err := kv.Get(ctx, partitionsKey)
	if err != nil {
		return fmt.Errorf("logstore: read partitions: %w", err)
	}
	p, _, err := parsePartitions(e.Value())
	if err != nil {
		return err
	}
	if p != want {
		return &PartitionsError{Recorded: p, Asked: want}
	}
	return nil
}
