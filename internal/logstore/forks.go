package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
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
	s  *Store // seals and opens the values (sealValue, openValue)
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
	return &ForkRecords{kv: kv, s: s}, nil
}

// Create writes the child's record if it has none; ErrForkRecordExists
// if it has.
func (f *ForkRecords) Create(ctx context.Context, child string, value []byte) error {
	value, err := f.s.sealValue(ctx, ForkBucket, child, value)
	if err != nil {
		return err
	}
	_, err = f.kv.Create(ctx, child, value)
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
	v, err := f.s.openValue(ctx, ForkBucket, child, e.Value())
	if err != nil {
		return ForkRecord{}, false, err
	}
	return ForkRecord{Value: v, Revision: e.Revision()}, true, nil
}

// Put writes the child's record, whatever it was.
func (f *ForkRecords) Put(ctx context.Context, child string, value []byte) error {
	value, err := f.s.sealValue(ctx, ForkBucket, child, value)
	if err == nil {
		_, err = f.kv.Put(ctx, child, value)
	}
	return err
}

// Replace writes the child's record only if it is still at revision (of
// several writers, one wins).
func (f *ForkRecords) Replace(ctx context.Context, child string, value []byte, revision uint64) error {
	value, err := f.s.sealValue(ctx, ForkBucket, child, value)
	if err == nil {
		_, err = f.kv.Update(ctx, child, value, revision)
	}
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

// ForkInFlight is what every fork record says of its copy, whoever wrote
// it: the child, the parent it copies and when its forker last renewed
// it. The eraser reads it (ADR 009, "Forks in flight"): a cascade erases
// the children being copied from a parent it erases, and no job deletes a
// child's events while a live copy may still write them.
type ForkInFlight struct {
	ChildID     string    `json:"childId"`
	ParentID    string    `json:"parentId"`
	HeartbeatAt time.Time `json:"heartbeatAt"`
}

// Live reports whether the copy's forker renewed it within stale.
func (f ForkInFlight) Live(now time.Time, stale time.Duration) bool {
	return now.Sub(f.HeartbeatAt) < stale
}

// ForksInFlight calls fn with every fork record; a record that does not
// read as one is skipped. No bucket yet (no forker ever ran) is no fork.
func (s *Store) ForksInFlight(ctx context.Context, fn func(ForkInFlight)) error {
	prefix := "$KV." + ForkBucket + "."
	err := s.walk(ctx, FollowSpec{Stream: "KV_" + ForkBucket, Subject: prefix + ">", PageEvents: lastPage, lastPerSubject: true}, false, func(m *Msg) error {
		f, ok, err := s.forkInFlight(ctx, m, prefix)
		if ok {
			fn(f)
		}
		return err
	})
	if isStreamNotFound(err) {
		return nil
	}
	return err
}

// ForkInFlightOf returns the child's fork record; ok is false when it
// has none.
func (s *Store) ForkInFlightOf(ctx context.Context, child string) (f ForkInFlight, ok bool, err error) {
	prefix := "$KV." + ForkBucket + "."
	m, err := s.msgGet(ctx, "KV_"+ForkBucket, msgGetRequest{LastFor: prefix + child})
	if isStreamNotFound(err) {
		return ForkInFlight{}, false, nil
	}
	if err != nil {
		return ForkInFlight{}, false, fmt.Errorf("logstore: %s %s: %w", ForkBucket, child, err)
	}
	if m == nil {
		return ForkInFlight{}, false, nil
	}
	return s.forkInFlight(ctx, m, prefix)
}

// forkInFlight reads a fork record's message; a delete or purge marker,
// or a value that does not name its child and parent, is none. So is a
// sealed value that does not open, its key gone included (the child is
// erased: no copy writes it any more, it reads the erasure record). A
// key that could not be read is the error.
func (s *Store) forkInFlight(ctx context.Context, m *Msg, prefix string) (ForkInFlight, bool, error) {
	if op := m.Header.Get(headerKVOperation); op == "DEL" || op == "PURGE" {
		return ForkInFlight{}, false, nil
	}
	child, ok := strings.CutPrefix(m.Subject, prefix)
	if !ok {
		return ForkInFlight{}, false, nil
	}
	v, err := s.openValue(ctx, ForkBucket, child, m.Data)
	if err != nil {
		if errors.Is(err, ErrKeyGone) || schema.CodeOf(err) == schema.CodeUnreadable {
			return ForkInFlight{}, false, nil
		}
		return ForkInFlight{}, false, fmt.Errorf("logstore: %s %s: %w", ForkBucket, child, err)
	}
	var f ForkInFlight
	if json.Unmarshal(v, &f) != nil || f.ParentID == "" || f.ChildID != child {
		return ForkInFlight{}, false, nil
	}
	return f, true, nil
}

// EraseForkRecord securely deletes every stored message of the child's
// fork record (its revisions too), as an erase drops a session's records
// (DropSessionRecords): a copy that learns its parent or child is erased
// drops its record so, leaving no byte of it in the files.
func (s *Store) EraseForkRecord(ctx context.Context, child string) error {
	return s.dropKey(ctx, ForkBucket, child)
}
