// Package store is the projector's Pebble read-model store: the key
// layout of the views and what their values hold (the summary in
// summary.go, the event index and compaction values in context.go), the
// checkpoint record and the view checksum. It is
// the only package that imports Pebble: the fold writes through a Batch,
// the HTTP side reads through a Snapshot (read.go).
//
// Every view key lives under the prefix "v"; the checksum covers exactly
// those keys and their values. Internal keys (the checkpoint, fold-state
// snapshots) live under "z" and are not covered: they describe how far the
// projector got and how to continue, not what the views say, so a live
// store and a clean rebuild of the same stream prefix have the same
// checksum even if they took snapshots at different moments.
//
// The checksum is the XOR of a 64-bit hash of every (key, value) pair. XOR
// is order independent and its own inverse, so a batch keeps it current by
// XOR-ing out the hash of a value it replaces or deletes and XOR-ing in
// the new one, without scanning; Scan recomputes it from scratch to verify
// a checkpoint on start.
package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// Key prefixes. View keys start with 'v', internal keys with 'z'.
var (
	viewLower = []byte("v")
	viewUpper = []byte("w")

	prefSummary    = []byte("vs") // vs<id> -> summary JSON
	prefEvent      = []byte("ve") // ve<id>\x00<seq BE8> -> event index value
	prefChild      = []byte("vk") // vk<parent>\x00<child> -> ""
	prefActivity   = []byte("va") // va<time BE8><id> -> ""
	prefStatus     = []byte("vt") // vt<status>\x00<time BE8><id> -> ""
	prefCompaction = []byte("vc") // vc<id> -> compaction summary JSON
	keyCheckpoint  = []byte("zc")
	prefSnapshot   = []byte("zf") // zf<id> -> fold state snapshot
)

// The activity and status indexes again per tenant (api.TenantIDPrefix):
// the sessions a tenant's token lists, its own keys only.
var (
	prefTenantActivity = []byte("vb") // vb<tenant>\x00<time BE8><id> -> ""
	prefTenantStatus   = []byte("vu") // vu<tenant>\x00<status>\x00<time BE8><id> -> ""
)

// The activity and status indexes again per agent of a tenant: the
// sessions of the tenant each agent may read (api.Authorize: it owns
// them, or they grant it), which a token naming agents lists (its agents'
// keys only). Agent names, as tenant names, hold no 0x00.
var (
	prefAgentActivity = []byte("vg") // vg<tenant>\x00<agent>\x00<time BE8><id> -> ""
	prefAgentStatus   = []byte("vh") // vh<tenant>\x00<agent>\x00<status>\x00<time BE8><id> -> ""
)

// The audit records of erased sessions by tenant (and the numbers of
// those a token of agents sees), and the owners of erased sessions:
// internal keys, not views. The records come from the
// audit stream, not from the log the views fold (a rebuild of the views
// from the log could not write them, and they are not in the checksum),
// and an erased session's owner is what its summary said when its views
// were removed (its events are gone: no rebuild finds it again).
var (
	prefTenantAudit       = []byte("zA") // zA<tenant>\x00<n BE8> -> audit record JSON, n the tenant's 1, 2, ...
	keyAuditCursor        = []byte("zB") // zB -> the audit stream sequence indexed up to (BE8)
	prefAgentsAudit       = []byte("zG") // zG<tenant>\x00<agents>\x00<m BE8> -> n BE8: the m-th record the agents see is the tenant's n-th
	prefAgentsAuditCursor = []byte("zH") // zH<tenant>\x00<agents> -> the tenant's n judged up to, the agents' last m (BE8 each)
	prefErasedOwner       = []byte("zo") // zo<id> -> the erased session's owner and grants JSON
)

// Session ids match ^[A-Za-z0-9_-]+$, so the 0x00 separator sorts below
// every id byte and a prefix scan of one id never reaches a longer id.

// SummaryKey is the key of a session's summary view.
func SummaryKey(id string) []byte { return cat(prefSummary, id) }

// SummaryPrefix bounds every summary key.
func SummaryPrefix() []byte { return prefSummary }

// EventKey is the key of the index entry for event seq of a session.
func EventKey(id string, seq uint64) []byte {
	return AppendEventKey(make([]byte, 0, len(prefEvent)+len(id)+9), id, seq)
}

// AppendEventKey appends EventKey(id, seq) to dst.
func AppendEventKey(dst []byte, id string, seq uint64) []byte {
	dst = append(dst, prefEvent...)
	dst = append(dst, id...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// EventPrefix bounds every event index key of a session.
func EventPrefix(id string) []byte { return append(cat(prefEvent, id), 0) }

// EventSeq returns the seq of an event index key.
func EventSeq(key []byte) uint64 {
	if len(key) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(key[len(key)-8:])
}

// ChildKey links a parent session to a child forked from it.
func ChildKey(parent, child string) []byte {
	return append(append(cat(prefChild, parent), 0), child...)
}

// ChildPrefix bounds the child keys of a parent.
func ChildPrefix(parent string) []byte { return append(cat(prefChild, parent), 0) }

// ActivityKey orders sessions by last activity.
// ns is the activity time as TimeKey gives it.
func ActivityKey(ns uint64, id string) []byte { return IndexKey(prefActivity, ns, id) }

// ActivityPrefix bounds the activity index.
func ActivityPrefix() []byte { return prefActivity }

// StatusKey orders the sessions of one status by last activity.
func StatusKey(status string, ns uint64, id string) []byte {
	return IndexKey(StatusPrefix(status), ns, id)
}

// StatusPrefix bounds the status index of one status.
func StatusPrefix(status string) []byte { return append(cat(prefStatus, status), 0) }

// TenantActivityPrefix bounds the activity index of one tenant's
// sessions.
func TenantActivityPrefix(tenant string) []byte { return append(cat(prefTenantActivity, tenant), 0) }

// TenantStatusPrefix bounds the status index of one status of one
// tenant's sessions.
func TenantStatusPrefix(tenant, status string) []byte {
	return append(append(TenantStatusesPrefix(tenant), status...), 0)
}

// TenantStatusesPrefix bounds the status indexes of one tenant's
// sessions.
func TenantStatusesPrefix(tenant string) []byte { return append(cat(prefTenantStatus, tenant), 0) }

// AgentActivityPrefix bounds the activity index of the sessions of
// tenant that agent may read.
func AgentActivityPrefix(tenant, agent string) []byte {
	return append(agentsKey(prefAgentActivity, tenant, []string{agent}), 0)
}

// AgentStatusPrefix bounds the status index of one status of the
// sessions of tenant that agent may read.
func AgentStatusPrefix(tenant, agent, status string) []byte {
	return append(append(append(agentsKey(prefAgentStatus, tenant, []string{agent}), 0), status...), 0)
}

// IndexKey is the key of session id, active at ns, in the activity or
// status index under prefix (ActivityPrefix, StatusPrefix and their
// tenants' and agents' forms): ActivityKey(ns, id) is
// IndexKey(ActivityPrefix(), ns, id).
func IndexKey(prefix []byte, ns uint64, id string) []byte {
	k := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), ns)
	return append(k, id...)
}

// IndexSession returns the session id at the end of an activity or status
// index key with the given prefix.
func IndexSession(prefix, key []byte) string {
	if len(key) < len(prefix)+8 {
		return ""
	}
	return string(key[len(prefix)+8:])
}

// IndexTime returns the activity time stored in an index key.
func IndexTime(prefix, key []byte) uint64 {
	if len(key) < len(prefix)+8 {
		return 0
	}
	return binary.BigEndian.Uint64(key[len(prefix):])
}

// TenantAuditPrefix bounds the audit records of one tenant's sessions.
func TenantAuditPrefix(tenant string) []byte { return append(cat(prefTenantAudit, tenant), 0) }

// TenantAuditKey is the key of the tenant's n-th audit record.
func TenantAuditKey(tenant string, n uint64) []byte {
	return binary.BigEndian.AppendUint64(TenantAuditPrefix(tenant), n)
}

// TenantAuditN is the n of a TenantAuditKey (or the m of an
// AgentsAuditKey) under prefix (0: none).
func TenantAuditN(prefix, key []byte) uint64 {
	if len(key) != len(prefix)+8 {
		return 0
	}
	return binary.BigEndian.Uint64(key[len(prefix):])
}

// AgentsAuditPrefix bounds the audit records of tenant seen by a token
// of agents (sorted, each once, as httpauth.AgentsOf gives them: agent
// names hold no ',' and no 0x00).
func AgentsAuditPrefix(tenant string, agents []string) []byte {
	return append(agentsKey(prefAgentsAudit, tenant, agents), 0)
}

// AgentsAuditKey is the key of the m-th audit record of tenant the agents
// see; its value is the record's number n of the tenant (TenantAuditKey),
// big-endian. TenantAuditN reads m from it.
func AgentsAuditKey(tenant string, agents []string, m uint64) []byte {
	return binary.BigEndian.AppendUint64(AgentsAuditPrefix(tenant, agents), m)
}

// AgentsAuditCursorKey holds the number of the tenant's last audit record
// the agents' records are indexed up to and the number of their last.
func AgentsAuditCursorKey(tenant string, agents []string) []byte {
	return agentsKey(prefAgentsAuditCursor, tenant, agents)
}

func agentsKey(p []byte, tenant string, agents []string) []byte {
	return append(append(cat(p, tenant), 0), strings.Join(agents, ",")...)
}

// AuditCursorKey holds the audit stream sequence the tenants' audit
// records are indexed up to.
func AuditCursorKey() []byte { return bytes.Clone(keyAuditCursor) }

// ErasedOwnerKey holds the owner and grants of erased session id.
func ErasedOwnerKey(id string) []byte { return cat(prefErasedOwner, id) }

// CompactionKey holds the summary of a session's last ended compaction.
func CompactionKey(id string) []byte { return cat(prefCompaction, id) }

// SnapshotKey holds a fold-state snapshot (internal, not checksummed).
func SnapshotKey(id string) []byte { return cat(prefSnapshot, id) }

// TimeKey is the index form of a time: Unix nanoseconds, clamped at 0.
func TimeKey(t time.Time) uint64 { return timeKey(t) }

func timeKey(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func cat(p []byte, s string) []byte {
	k := make([]byte, 0, len(p)+len(s)+10)
	return append(append(k, p...), s...)
}

// PrefixEnd returns the smallest key greater than every key with prefix p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Hash is the checksum contribution of one view key and value.
func Hash(key, value []byte) uint64 {
	hk := xxhash.Sum64(key)
	hv := xxhash.Sum64(value)
	// Mix so that swapping bytes between key and value changes the hash.
	x := hk*0x9E3779B97F4A7C15 ^ (hv + 0x632BE59BD9B4E5C1 + hk<<6 + hk>>2)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// StreamPos is the position reached in one stream.
type StreamPos struct {
	Name string `json:"name"`
	// Seq is the last stream sequence folded into the views.
	Seq uint64 `json:"seq"`
	// ID names the message at Seq: its Nats-Msg-Id, else its subject. A
	// log that lost that message and stored another at the same sequence
	// is told by it (the projector's rolled-back check).
	ID string `json:"id,omitempty"`
	// Subject is the subject of the message at Seq: when the stream no
	// longer holds it, the session it names tells an erasure (it has a
	// record) from a loss.
	Subject string `json:"subject,omitempty"`
	// Created is the stream's creation time: a stream deleted and created
	// again restarts its sequences, so the position would mean nothing.
	Created time.Time `json:"created"`
}

// Checkpoint describes what the views reflect. It is written in the same
// Pebble batch as the view changes it covers.
type Checkpoint struct {
	Version  string      `json:"version"`
	Checksum uint64      `json:"checksum"`
	Streams  []StreamPos `json:"streams"`
}

// Stream returns the position of a stream (zero if absent).
func (c Checkpoint) Stream(name string) StreamPos {
	for _, s := range c.Streams {
		if s.Name == name {
			return s
		}
	}
	return StreamPos{Name: name}
}

// ErrCorruptCheckpoint: the stored checkpoint does not decode or its CRC
// does not match.
var ErrCorruptCheckpoint = errors.New("store: corrupt checkpoint")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeCheckpoint renders a checkpoint: JSON followed by its CRC-32C, so
// a damaged position is detected even when the view checksum still
// matches.
func EncodeCheckpoint(c Checkpoint) []byte {
	b, _ := json.Marshal(c)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeCheckpoint is the inverse of EncodeCheckpoint.
func DecodeCheckpoint(v []byte) (Checkpoint, error) {
	var c Checkpoint
	if len(v) < 5 {
		return c, ErrCorruptCheckpoint
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return c, ErrCorruptCheckpoint
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrCorruptCheckpoint, err)
	}
	return c, nil
}

// Options tune the store.
type Options struct {
	// CacheBytes is Pebble's block cache size (default 64 MiB).
	CacheBytes int64
	// MemTableBytes (default 32 MiB).
	MemTableBytes uint64
}

// DB is the read-model store. Reads are safe for concurrent use; one
// writer (the projector's fold loop) commits batches.
type DB struct {
	dir  string
	opts Options
	db   *pebble.DB
	// mu guards what a commit on another goroutine (CommitAsync) shares
	// with the writer: sum, tip, the spare buffers and pb.
	mu  sync.Mutex
	sum uint64 // checksum of the committed views, kept by the writer
	// tip is the checksum a new batch starts from: sum, or that of the
	// batch handed to CommitAsync and not yet landed.
	tip uint64
	// inflight is the last batch handed to CommitAsync (nil: none).
	inflight *Pending
	// gate, if set, runs before each batch handed to CommitAsync goes to
	// Pebble (tests: SetCommitGate).
	gate func()
	// spares are the buffers of the last batches committed or abandoned,
	// for the next ones: a catch-up's batches are megabytes each, which
	// allocated anew (and zeroed, and grown) cost more than reusing them.
	// Two: one batch in flight while the next one fills.
	spares []spare
	// lastOps is the number of writes of the last batch committed.
	lastOps int
	// pb is the Pebble batch the last commit used, reset: it keeps its
	// buffer (of a catch-up batch's size) for the next commit; order
	// likewise the buffers that sorted its writes (Batch.sorted).
	pb    *pebble.Batch
	order [2][]sortItem
}

// Open opens (creating) the store in dir.
func Open(dir string, opts Options) (*DB, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 64 << 20
	}
	if opts.MemTableBytes == 0 {
		opts.MemTableBytes = 32 << 20
	}
	d := &DB{dir: dir, opts: opts}
	if err := d.open(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *DB) open() error {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	cache := pebble.NewCache(d.opts.CacheBytes)
	defer cache.Unref()
	o := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                d.opts.MemTableBytes,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       1000,
		Logger:                      quietLogger{},
	}
	db, err := pebble.Open(d.dir, o)
	if errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("store: open %s: in use by another process (a running projector?): %w", d.dir, err)
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", d.dir, err)
	}
	d.db = db
	return nil
}

// dropBatch waits for a batch in flight and closes the kept Pebble batch
// (before its DB closes).
func (d *DB) dropBatch() error {
	err := d.Landed()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pb != nil {
		d.pb.Close()
		d.pb = nil
	}
	return err
}

// Dir is the store's directory.
func (d *DB) Dir() string { return d.dir }

// Close syncs and closes the store.
func (d *DB) Close() error {
	if d.db == nil {
		return nil
	}
	lerr := d.dropBatch()
	// Commits use NoSync: make the last ones durable on a clean stop.
	if err := d.db.LogData(nil, pebble.Sync); err != nil {
		d.db.Close()
		d.db = nil
		return fmt.Errorf("store: sync: %w", err)
	}
	err := d.db.Close()
	d.db = nil
	if lerr != nil {
		return lerr
	}
	return err
}

// Wipe deletes every key: the store is rebuilt from the start of the
// stream. Removing the directory is faster than deleting a large store key
// by key and leaves nothing of the old views behind.
func (d *DB) Wipe() error {
	if d.db != nil {
		if err := d.dropBatch(); err != nil {
			return fmt.Errorf("store: wipe: %w", err)
		}
		if err := d.db.Close(); err != nil {
			return fmt.Errorf("store: wipe: %w", err)
		}
		d.db = nil
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("store: wipe: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(d.dir, e.Name())); err != nil {
			return fmt.Errorf("store: wipe: %w", err)
		}
	}
	d.sum, d.tip = 0, 0
	return d.open()
}

// Checkpoint reads the stored checkpoint; ok is false when there is none.
func (d *DB) Checkpoint() (c Checkpoint, ok bool, err error) {
	v, found, err := d.Get(keyCheckpoint)
	if err != nil || !found {
		return c, false, err
	}
	c, err = DecodeCheckpoint(v)
	return c, err == nil, err
}

// SetChecksum tells the store the checksum of its committed views (after a
// verified Scan on start).
func (d *DB) SetChecksum(sum uint64) {
	d.mu.Lock()
	d.sum, d.tip = sum, sum
	d.mu.Unlock()
}

// Checksum is the checksum of the committed views as the writer kept it.
func (d *DB) Checksum() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sum
}

// Scan recomputes the checksum of every view key from the data.
func (d *DB) Scan() (uint64, int, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: viewLower, UpperBound: viewUpper})
	if err != nil {
		return 0, 0, err
	}
	var sum uint64
	n := 0
	for it.First(); it.Valid(); it.Next() {
		sum ^= Hash(it.Key(), it.Value())
		n++
	}
	if err := it.Close(); err != nil {
		return 0, 0, err
	}
	return sum, n, nil
}

// Get returns a copy of the value at key; ok is false when there is none.
// It reads the committed store as it is now; a reader that needs several
// reads to agree takes a Snapshot.
func (d *DB) Get(key []byte) (value []byte, ok bool, err error) { return copyValue(d.db.Get(key)) }

// Iter returns an iterator over the committed keys with the prefix (every
// key when prefix is nil).
func (d *DB) Iter(prefix []byte) (Iterator, error) { return iterator(d.db.NewIter(bounds(prefix))) }

// SetInternals writes internal keys (pairs of key and value, outside the
// views and their checksum) at once, apart from the views' batches: what
// follows another source than the log (the audit stream).
func (d *DB) SetInternals(kvs [][2][]byte) error {
	pb := d.db.NewBatch()
	defer pb.Close()
	for _, kv := range kvs {
		if bytes.HasPrefix(kv[0], viewLower) {
			return fmt.Errorf("store: %q is a view key", kv[0])
		}
		if err := pb.Set(kv[0], kv[1], nil); err != nil {
			return err
		}
	}
	if err := pb.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// Batch is one atomic change to the views plus the checkpoint.
//
// It gathers its writes and hands them to Pebble sorted by key on Commit:
// Pebble inserts a batch into its memtable in the batch's order, starting
// each search where the previous insert ended, so sorted keys (runs of
// one session's event keys) cost a short hop each where the order they
// were made in (sessions interleaved) costs a search from the top.
type Batch struct {
	d   *DB
	buf []byte // keys and values, one after the other
	ops []batchOp
	sum uint64
}

type batchOp struct {
	key, end int // buf[key:val] is the key, buf[val:end] the value
	val      int
	del      bool
	// pre is the key's first 16 bytes (zero-padded) as two big-endian
	// words: comparing them orders most pairs of keys as bytes.Compare
	// would, without reading buf.
	pre [2]uint64
}

// keyPrefix is the first 16 bytes of k, zero-padded, as two big-endian
// words. Where two keys' prefixes differ they order the keys as
// bytes.Compare does: at the first differing byte either both keys have
// bytes, or the shorter one has ended (padding 0 against a byte that is
// not 0) and sorts first. Equal prefixes say nothing.
func keyPrefix(k []byte) [2]uint64 {
	var b [16]byte
	copy(b[:], k)
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (b *Batch) opKey(o *batchOp) []byte { return b.buf[o.key:o.val] }

// NewBatch starts a batch on top of the committed views.
func (d *DB) NewBatch() *Batch { return d.NewBatchWithSize(0) }

// NewBatchWithSize is NewBatch with room for size bytes of changes made
// at once: a large batch grown by doubling from empty would allocate and
// copy about twice its size.
func (d *DB) NewBatchWithSize(size int) *Batch {
	d.mu.Lock()
	b := &Batch{d: d, sum: d.tip}
	if n := len(d.spares); n > 0 {
		b.buf, b.ops = d.spares[n-1].buf, d.spares[n-1].ops
		d.spares = d.spares[:n-1]
	}
	ops := d.lastOps + d.lastOps/8
	d.mu.Unlock()
	if cap(b.buf) < size {
		// Room to spare: batches of a catch-up grow (snapshots of longer
		// sessions), and a buffer is reused two batches later.
		b.buf = make([]byte, 0, size+size/4)
	}
	if ops = max(ops, size/64); cap(b.ops) < ops {
		b.ops = make([]batchOp, 0, ops+ops/4)
	}
	return b
}

// spare is the buffers of a batch done with.
type spare struct {
	buf []byte
	ops []batchOp
}

// maxSpares: one batch in flight, one filling.
const maxSpares = 2

// release hands the batch's buffers to a next one.
func (b *Batch) release() {
	b.d.mu.Lock()
	if len(b.d.spares) < maxSpares {
		b.d.spares = append(b.d.spares, spare{b.buf[:0], b.ops[:0]})
	}
	b.d.mu.Unlock()
	b.buf, b.ops = nil, nil
}

func (b *Batch) add(key, value []byte, del bool) {
	o := batchOp{key: len(b.buf), del: del, pre: keyPrefix(key)}
	b.buf = append(b.buf, key...)
	o.val = len(b.buf)
	b.buf = append(b.buf, value...)
	o.end = len(b.buf)
	b.ops = append(b.ops, o)
}

// Set writes a view key. old is the value it replaces (nil when the key
// is new): the caller knows it, which keeps the checksum incremental.
func (b *Batch) Set(key, old, value []byte) {
	if old != nil {
		b.sum ^= Hash(key, old)
	}
	b.sum ^= Hash(key, value)
	b.add(key, value, false)
}

// Delete removes a view key whose current value is old.
func (b *Batch) Delete(key, old []byte) {
	b.sum ^= Hash(key, old)
	b.add(key, nil, true)
}

// DeleteInternal removes a key outside the checksum (a snapshot).
func (b *Batch) DeleteInternal(key []byte) { b.add(key, nil, true) }

// Keys lists the keys the batch writes or deletes.
func (b *Batch) Keys() [][]byte {
	out := make([][]byte, len(b.ops))
	for i := range b.ops {
		out[i] = bytes.Clone(b.opKey(&b.ops[i]))
	}
	return out
}

// SetInternal writes a key outside the checksum (snapshots).
func (b *Batch) SetInternal(key, value []byte) { b.add(key, value, false) }

// Ops is the number of writes in the batch.
func (b *Batch) Ops() int { return len(b.ops) }

// Bytes is the size of the keys and values the batch holds.
func (b *Batch) Bytes() int { return len(b.buf) }

// Checksum is the view checksum the batch would commit.
func (b *Batch) Checksum() uint64 { return b.sum }

// Commit writes the checkpoint (with the batch's checksum) into the batch
// and commits it. NoSync: Pebble applies a batch atomically through its
// WAL and a crash loses at most a suffix of batches, each carrying its own
// checkpoint, so the store always reopens at a consistent position; the
// stream still holds what was lost.
//
// A batch handed to CommitAsync before lands first.
func (b *Batch) Commit(cp Checkpoint) error {
	if err := b.d.Landed(); err != nil {
		return err
	}
	b.d.mu.Lock()
	b.d.tip = b.sum
	b.d.mu.Unlock()
	return b.commit(cp)
}

// Pending is a batch handed to CommitAsync.
type Pending struct {
	cp   Checkpoint
	done chan struct{}
	err  error
}

// Wait waits for the batch to land and returns the checkpoint it wrote
// (with its checksum) or why it did not.
func (p *Pending) Wait() (Checkpoint, error) {
	<-p.done
	return p.cp, p.err
}

// Done is closed once the batch has landed (or failed).
func (p *Pending) Done() <-chan struct{} { return p.done }

// CommitAsync commits the batch as Commit does, on another goroutine, so
// that the writer can build the next batch meanwhile: one batch in
// flight at a time, landing in the order they were handed over (it first
// waits for the one before). A new batch starts from this one's checksum.
// Reads do not see the batch until it has landed: a writer that reads
// what it wrote waits for it first (Landed). After an error the store
// takes no more batches; the writer stops.
func (b *Batch) CommitAsync(cp Checkpoint) (*Pending, error) {
	d := b.d
	if err := d.Landed(); err != nil {
		return nil, err
	}
	cp.Checksum = b.sum
	p := &Pending{cp: cp, done: make(chan struct{})}
	d.mu.Lock()
	d.tip = b.sum
	d.inflight = p
	gate := d.gate
	d.mu.Unlock()
	go func() {
		defer close(p.done)
		if gate != nil {
			gate()
		}
		p.err = b.commit(cp)
	}()
	return p, nil
}

// Landed waits for the batch handed to CommitAsync, if any, and returns
// its error.
func (d *DB) Landed() error {
	d.mu.Lock()
	p := d.inflight
	d.mu.Unlock()
	if p == nil {
		return nil
	}
	_, err := p.Wait()
	return err
}

func (b *Batch) commit(cp Checkpoint) error {
	cp.Checksum = b.sum
	b.d.mu.Lock()
	pb, order, spare := b.d.pb, b.d.order[0], b.d.order[1]
	b.d.pb, b.d.order = nil, [2][]sortItem{}
	b.d.mu.Unlock()
	if pb == nil {
		pb = b.d.db.NewBatchWithSize(len(b.buf)+8*len(b.ops)+256, pebble.WithMaxRetainedSizeBytes(maxRetainedBatch))
	}
	order, spare = b.sorted(order, spare)
	for _, it := range order {
		o := &b.ops[it.op]
		if o.del {
			pb.Delete(b.opKey(o), nil)
		} else {
			pb.Set(b.opKey(o), b.buf[o.val:o.end], nil)
		}
	}
	pb.Set(keyCheckpoint, EncodeCheckpoint(cp), nil)
	if err := pb.Commit(pebble.NoSync); err != nil {
		pb.Close()
		b.d.mu.Lock()
		b.d.tip = b.d.sum
		b.d.mu.Unlock()
		return fmt.Errorf("store: commit: %w", err)
	}
	pb.Reset()
	b.d.mu.Lock()
	b.d.sum = b.sum
	b.d.pb, b.d.order = pb, [2][]sortItem{order, spare}
	b.d.lastOps = len(b.ops)
	b.d.mu.Unlock()
	b.release() // pb held copies
	return nil
}

// sortItem is a write of a batch in the order commit hands them to
// Pebble: its key's prefix (after sortRun, of the key past its first 16
// bytes), and its index in ops (the order the writes were made in).
type sortItem struct {
	pre [2]uint64
	op  int32
}

// digit is byte d of the item's prefix, 0 the first.
func (it *sortItem) digit(d int) byte {
	if d < 8 {
		return byte(it.pre[0] >> (56 - 8*d))
	}
	return byte(it.pre[1] >> (56 - 8*(d-8)))
}

// sorted returns the batch's writes sorted by key; of two writes of one
// key the later stays later, and wins. order and spare are buffers to
// reuse (the result is one of them, spare the other). The items are
// sorted by their prefixes with a radix sort, a pass per byte that
// differs among them, which keeps equal prefixes in the order made; each
// run of equal prefixes is then checked in one pass, and sorted only when
// its keys are out of order (sortRun): the runs are mostly the event keys
// of one session (the session id fills the prefix), made in key order.
// Sorting the ops with comparisons was a tenth of a catch-up's
// instructions (BenchmarkBatchSort).
func (b *Batch) sorted(order, spare []sortItem) (sorted, other []sortItem) {
	n := len(b.ops)
	order, spare = slices.Grow(order[:0], n)[:n], slices.Grow(spare[:0], n)[:n]
	var counts [16][256]int32
	for i := range b.ops {
		p := b.ops[i].pre
		order[i] = sortItem{p, int32(i)}
		countDigits(&counts, p)
	}
	src, dst := order, spare
	for d := 15; d >= 0 && n > 0; d-- {
		c := &counts[d]
		if int(c[src[0].digit(d)]) == n {
			continue // the same byte in every prefix
		}
		var at int32
		for k := range c {
			c[k], at = at, at+c[k]
		}
		shift, w := 56-8*(d%8), d/8
		for i := range src {
			k := byte(src[i].pre[w] >> shift)
			dst[c[k]] = src[i]
			c[k]++
		}
		src, dst = dst, src
	}
	for i := 0; i < n; {
		j := i + 1
		for j < n && src[j].pre == src[i].pre {
			j++
		}
		if j-i > 1 {
			b.sortRun(src[i:j])
		}
		i = j
	}
	return src, dst
}

// countDigits counts each byte of prefix p in counts (counts[d] for byte
// d), written out: the loop over the digits it replaces cost three times
// the instructions (185 an item against 62, callgrind).
func countDigits(counts *[16][256]int32, p [2]uint64) {
	countWord((*[8][256]int32)(counts[:8]), p[0])
	countWord((*[8][256]int32)(counts[8:]), p[1])
}

func countWord(c *[8][256]int32, x uint64) {
	c[0][byte(x>>56)]++
	c[1][byte(x>>48)]++
	c[2][byte(x>>40)]++
	c[3][byte(x>>32)]++
	c[4][byte(x>>24)]++
	c[5][byte(x>>16)]++
	c[6][byte(x>>8)]++
	c[7][byte(x)]++
}

// sortRun puts a run of items of one prefix in key order, the later of
// two writes of one key last, when it is not in that order already. The
// run's keys agree in their first 16 bytes (or are shorter, zero-padded
// alike), so they are compared by their next 16 as a prefix first (an
// item's pre is free to hold it: the run's is known), and as bytes only
// where those agree too: the out-of-order runs are mostly index keys of
// one time and many sessions, whose ids differ there.
func (b *Batch) sortRun(run []sortItem) {
	key := func(it sortItem) []byte { return b.opKey(&b.ops[it.op]) }
	for k := 1; ; k++ {
		if k == len(run) {
			return
		}
		if bytes.Compare(key(run[k-1]), key(run[k])) > 0 {
			break
		}
	}
	for k := range run {
		var rest []byte
		if kb := key(run[k]); len(kb) > 16 {
			rest = kb[16:]
		}
		run[k].pre = keyPrefix(rest)
	}
	slices.SortFunc(run, func(x, y sortItem) int {
		if x.pre != y.pre {
			if x.pre[0] != y.pre[0] {
				return cmp.Compare(x.pre[0], y.pre[0])
			}
			return cmp.Compare(x.pre[1], y.pre[1])
		}
		if c := bytes.Compare(key(x), key(y)); c != 0 {
			return c
		}
		return cmp.Compare(x.op, y.op)
	})
}

// maxRetainedBatch: the Pebble batch a commit used keeps a buffer up to
// this size for the next commit (a catch-up's batches are a few MiB;
// Pebble's default keeps 1 MiB, so each would be allocated anew).
const maxRetainedBatch = 32 << 20

// Abandon drops the batch.
func (b *Batch) Abandon() { b.release() }

// Scrub leaves no copy of deleted keys' old values in the store's files
// (DESIGN.md section 14). It flushes the memtable that holds the deletes,
// and compacts each [lo, hi) range down to the last level, where the
// tombstones and every value they shadow are dropped and the SSTables that
// held them are deleted. The write-ahead logs remain: Pebble recycles an
// obsolete log by writing the next one over it from the start, so its old
// tail (values included) stays on disk until it is overwritten. Pebble
// recycles only logs made since it opened and deletes every other obsolete
// log on open, so Scrub reopens the store, flushes the log it replayed
// away, and reopens it once more (a close waits for the deletions).
//
// The caller keeps readers out while it runs: a snapshot would keep the
// values it sees from being compacted away, and the store is reopened.
// An erasure is rare; this costs a compaction and two reopenings.
func (d *DB) Scrub(ranges [][2][]byte) error {
	if err := d.db.Flush(); err != nil {
		return fmt.Errorf("store: scrub: flush: %w", err)
	}
	for _, r := range ranges {
		if err := d.db.Compact(context.Background(), r[0], r[1], false); err != nil {
			return fmt.Errorf("store: scrub: compact: %w", err)
		}
	}
	if err := d.reopen(); err != nil {
		return fmt.Errorf("store: scrub: %w", err)
	}
	if err := d.db.Flush(); err != nil {
		return fmt.Errorf("store: scrub: flush: %w", err)
	}
	if err := d.reopen(); err != nil {
		return fmt.Errorf("store: scrub: %w", err)
	}
	return nil
}

// reopen closes the store and opens it again (the checksum is kept).
func (d *DB) reopen() error {
	if err := d.dropBatch(); err != nil {
		return err
	}
	if err := d.db.Close(); err != nil {
		d.db = nil
		return err
	}
	d.db = nil
	return d.open()
}

// SetCommitGate makes each batch handed to CommitAsync wait for gate to
// return before it goes to Pebble (tests use it to hold batches in
// flight, as a slow disk would).
func (d *DB) SetCommitGate(gate func()) {
	d.mu.Lock()
	d.gate = gate
	d.mu.Unlock()
}

// SetCheckpointRaw overwrites the stored checkpoint bytes (tests use it to
// corrupt the checkpoint).
func (d *DB) SetCheckpointRaw(v []byte) error { return d.db.Set(keyCheckpoint, v, pebble.Sync) }

// RawPut writes any key without touching the checksum (tests use it to
// damage views).
func (d *DB) RawPut(key, value []byte) error { return d.db.Set(key, value, pebble.Sync) }

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: fatal: "+format+"\n", args...)
	os.Exit(2)
}

var _ io.Closer = (*DB)(nil)
