package logstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// ForkBucket holds one record per fork copy in flight (key = child id).
const ForkBucket = api.ForkBucket

// ErrForkRecordExists: CreateForkRecord found a record for the child.
var ErrForkRecordExists = errors.New("logstore: fork record exists")

// ForkRecords is the SESSION_FORKS bucket: the forker's records of copies
// in flight, one per child id. The values are the forker's; the bucket
// only stores them.
type ForkRecords struct {
	kv jetstream.KeyValue
}

// ForkRecord is a record's value and revision.
type ForkRecord struct {
	Value    []byte
	Revision uint64
}

// OpenForkRecords opens the fork bucket, creating or updating it first
// unless the store was opened with NoProvision.
func (s *Store) OpenForkRecords(ctx context.Context) (*ForkRecords, error) {
	var kv jetstream.KeyValue
	var err error
	if s.cfg.NoProvision {
		kv, err = s.js.KeyValue(ctx, ForkBucket)
	} else {
		kv, err = s.provisionBucket(ctx, ForkBucket, "sessionlog-forker: fork copies in flight (key = child id)", 0)
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", ForkBucket, err)
	}
	return &ForkRecords{kv: kv}, nil
}

// Create writes the child's record if it has none; ErrForkRecordExists
// if it has.
func (f *ForkRecords) Create(ctx context.Context, child string, value []byte) error {
	_, err := f.kv.Create(ctx, child, value)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return ErrForkRecordExists
	}
	return err
}

// Get returns the child's record; ok is false when it has none.
func (f *ForkRecords) Get(ctx context.Context, child string) (rec ForkRecord, ok bool, err error) {
	e, err := f.kv.Get(ctx, child)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return ForkRecord{}, false, nil
	}
	if err != nil {
		return ForkRecord{}, false, err
	}
	return ForkRecord{Value: e.Value(), Revision: e.Revision()}, true, nil
}

// Put writes the child's record, whatever it was.
func (f *ForkRecords) Put(ctx context.Context, child string, value []byte) error {
	_, err := f.kv.Put(ctx, child, value)
	return err
}

// Replace writes the child's record only if it is still at revision (of
// several writers, one wins).
func (f *ForkRecords) Replace(ctx context.Context, child string, value []byte, revision uint64) error {
	_, err := f.kv.Update(ctx, child, value, revision)
	return err
}

// Drop removes the child's record and its history.
func (f *ForkRecords) Drop(ctx context.Context, child string) error {
	return f.kv.Purge(ctx, child)
}

// Children lists the child ids that have a record.
func (f *ForkRecords) Children(ctx context.Context) ([]string, error) {
	lister, err := f.kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}
