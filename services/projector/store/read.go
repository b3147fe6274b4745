package store

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// The read side of the store. The projector's HTTP side reads through a
// Snapshot and nothing else: a Snapshot has no method that writes, and no
// Pebble type crosses this package's boundary (the architecture test
// keeps Pebble inside it). Besides Get and Iter, a Snapshot reads the
// views typed, decoded next to their codecs: the summary (Summary, in
// summary.go), the last compaction, the event index's stream seqs and
// context entries by seq range, and the ranges rewinds abandoned (in
// context.go), the pages of the lists of sessions (List and AgentsList,
// in list.go), the sessions holding a search's terms (Search, in
// search.go) and the audit index (in audit.go), so that the HTTP side
// decodes no view value itself.

// Snapshot is a consistent read-only view of the committed store at the
// moment it was taken: every read through it sees the same batches,
// whatever the writer commits meanwhile. Close it when done; an open
// snapshot keeps the values it sees from being compacted away.
type Snapshot struct{ s *pebble.Snapshot }

// NewSnapshot takes a snapshot of the committed store. The caller keeps
// it from outliving the store (a Close, Wipe or Scrub).
func (d *DB) NewSnapshot() Snapshot { return Snapshot{d.db.NewSnapshot()} }

// Get returns a copy of the value at key as the snapshot sees it; ok is
// false when there is none.
func (s Snapshot) Get(key []byte) (value []byte, ok bool, err error) {
	return copyValue(s.s.Get(key))
}

// getJSON decodes the JSON value at key as the snapshot sees it (nil:
// none). It decodes the value where Pebble holds it, without the copy Get
// makes: json.Unmarshal copies what it keeps.
func getJSON[T any](s Snapshot, key []byte) (*T, error) {
	v, closer, err := s.s.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	out := new(T)
	if err := json.Unmarshal(v, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Iter returns an iterator over the snapshot's keys with the prefix
// (every key when prefix is nil).
func (s Snapshot) Iter(prefix []byte) (Iterator, error) {
	return iterator(s.s.NewIter(bounds(prefix)))
}

// Close releases the snapshot.
func (s Snapshot) Close() error { return s.s.Close() }

// Children calls fn with the id of each session forked from parent (the
// child index), in id order, until fn returns false.
func (s Snapshot) Children(parent string, fn func(child string) bool) error {
	prefix := ChildPrefix(parent)
	it, err := s.Iter(prefix)
	if err != nil {
		return err
	}
	for ok := it.First(); ok && fn(string(it.Key()[len(prefix):])); ok = it.Next() {
	}
	return it.Close()
}

// StatusCount counts the sessions of a status (its status index).
func (s Snapshot) StatusCount(status string) (n int, err error) {
	it, err := s.Iter(StatusPrefix(status))
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Close()
}

// Iterator walks the keys of one prefix in order, from a Snapshot or the
// committed store (DB.Iter). Positioning methods return whether the
// iterator stands on a key; Key and Value are valid until the next move
// and are not to be modified. Close returns the first error the walk met.
type Iterator struct{ it *pebble.Iterator }

// First moves to the first key.
func (i Iterator) First() bool { return i.it.First() }

// Last moves to the last key.
func (i Iterator) Last() bool { return i.it.Last() }

// Next moves to the following key.
func (i Iterator) Next() bool { return i.it.Next() }

// Prev moves to the preceding key.
func (i Iterator) Prev() bool { return i.it.Prev() }

// SeekGE moves to the first key at or after key.
func (i Iterator) SeekGE(key []byte) bool { return i.it.SeekGE(key) }

// SeekLT moves to the last key before key.
func (i Iterator) SeekLT(key []byte) bool { return i.it.SeekLT(key) }

// Valid reports whether the iterator stands on a key.
func (i Iterator) Valid() bool { return i.it.Valid() }

// Key is the current key.
func (i Iterator) Key() []byte { return i.it.Key() }

// Value is the current value.
func (i Iterator) Value() []byte { return i.it.Value() }

// Close releases the iterator and returns the walk's error, if any.
func (i Iterator) Close() error { return i.it.Close() }

// closeIter closes it and keeps its error in *err if *err is nil (a
// deferred close of a walk that returns err).
func closeIter(it Iterator, err *error) {
	if cerr := it.Close(); *err == nil {
		*err = cerr
	}
}

// bounds are the iterator options of a prefix scan.
func bounds(prefix []byte) *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: prefix, UpperBound: PrefixEnd(prefix)}
}

func iterator(it *pebble.Iterator, err error) (Iterator, error) {
	return Iterator{it}, err
}

// copyValue turns a Pebble get into a copy of the value and whether there
// was one.
func copyValue(v []byte, closer io.Closer, err error) ([]byte, bool, error) {
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// Metrics is what the store holds in memory.
type Metrics struct {
	// MemTableBytes is the size of Pebble's memtables.
	MemTableBytes int64
	// BlockCacheBytes is the size of the block cache's contents.
	BlockCacheBytes int64
}

// Metrics samples the store's memory (zero while it is closed).
func (d *DB) Metrics() Metrics {
	if d.db == nil {
		return Metrics{}
	}
	m := d.db.Metrics()
	return Metrics{MemTableBytes: int64(m.MemTable.Size), BlockCacheBytes: m.BlockCache.Size}
}
