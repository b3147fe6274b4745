package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotBucket holds the writer's snapshots of sessions' folded state
// (DESIGN.md section 2, "Snapshots"): key <session id> is the head (a
// SnapshotHead), keys <session id>.<part>.<n> the chunks of its parts. A
// snapshot is only a shortcut: a reader checks it against the log and
// folds from the start when it does not match.
const SnapshotBucket = "SESSION_SNAPSHOTS"

// SnapshotHead is a snapshot's head record.
type SnapshotHead struct {
	// The last event the snapshot covers: its session seq, stream seq
	// and ChainHash. No event id (nor anything else a body holds): a
	// head's revisions replaced by the next are dropped by the server
	// without an overwrite; the reader takes the id from the stored event.
	Seq       uint64 `json:"seq"`
	StreamSeq uint64 `json:"streamSeq"`
	Hash      string `json:"hash"`
	// State is the folded state; IDs the parts that index the event ids
	// of events 1..Seq, each written once and kept while the head names
	// it (the reader's own format).
	State SnapshotPart   `json:"state"`
	IDs   []SnapshotPart `json:"ids,omitempty"`
}

// SnapshotPart names a part of a snapshot stored in chunks.
type SnapshotPart struct {
	Name   string `json:"name"`
	Chunks int    `json:"chunks"`
	Bytes  int    `json:"bytes"`
	// Sum is the xxhash64 of the whole part: a part whose chunks were
	// written by two snapshots (a write that failed half way, two writers)
	// does not read.
	Sum uint64 `json:"sum"`
}

// snapshotChunk bounds one stored chunk (below any server's max payload).
func (s *Store) snapshotChunk() int {
	return max(min(512<<10, int(s.nc.MaxPayload())-8<<10), 4<<10)
}

func snapshotSubject(key string) string { return "$KV." + SnapshotBucket + "." + key }

// PutSnapshotPart stores data as the session's snapshot part name.
func (s *Store) PutSnapshotPart(ctx context.Context, sessionID, name string, data []byte) (SnapshotPart, error) {
	p := SnapshotPart{Name: name, Bytes: len(data), Sum: xxhash.Sum64(data)}
	size := s.snapshotChunk()
	for off := 0; off == 0 || off < len(data); off += size {
		chunk := data[off:min(off+size, len(data))]
		key := sessionID + "." + name + "." + strconv.Itoa(p.Chunks)
		if _, err := s.js.Publish(ctx, snapshotSubject(key), chunk); err != nil {
			return p, fmt.Errorf("logstore: snapshot of %s: %w", sessionID, err)
		}
		p.Chunks++
	}
	return p, nil
}

// PutSnapshotHead stores the session's snapshot head, written after every
// part it names.
func (s *Store) PutSnapshotHead(ctx context.Context, sessionID string, h SnapshotHead) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := s.js.Publish(ctx, snapshotSubject(sessionID), b); err != nil {
		return fmt.Errorf("logstore: snapshot head of %s: %w", sessionID, err)
	}
	return nil
}

// SnapshotHeadOf reads the session's snapshot head; nil when it has none.
func (s *Store) SnapshotHeadOf(ctx context.Context, sessionID string) (*SnapshotHead, error) {
	m, err := s.msgGet(ctx, "KV_"+SnapshotBucket, msgGetRequest{LastFor: snapshotSubject(sessionID)})
	if isStreamNotFound(err) || err == nil && (m == nil || m.Header.Get(headerKVOperation) != "") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: snapshot head of %s: %w", sessionID, err)
	}
	var h SnapshotHead
	if err := json.Unmarshal(m.Data, &h); err != nil {
		return nil, fmt.Errorf("logstore: snapshot head of %s: %w", sessionID, err)
	}
	return &h, nil
}

// ErrSnapshotPart: a stored part is missing or not the one its head names.
var ErrSnapshotPart = errors.New("logstore: snapshot part does not match its head")

// SnapshotPartOf reads a part the session's snapshot head names, checked
// against its size and sum (ErrSnapshotPart).
func (s *Store) SnapshotPartOf(ctx context.Context, sessionID string, p SnapshotPart) ([]byte, error) {
	if p.Bytes < 0 || p.Chunks < 1 || p.Chunks > p.Bytes/4096+1 {
		return nil, fmt.Errorf("%w: %s of %s", ErrSnapshotPart, p.Name, sessionID)
	}
	kv, err := s.snapshotKV(ctx)
	if err != nil {
		return nil, err
	}
	// KV gets, a few at once: direct gets (the bucket allows them),
	// answered with the chunk as stored, from any replica (a stale one
	// fails the sum).
	chunks := make([][]byte, p.Chunks)
	errs := make([]error, p.Chunks)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for n := range p.Chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e, err := kv.Get(ctx, sessionID+"."+p.Name+"."+strconv.Itoa(n))
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				errs[n] = fmt.Errorf("%w: %s of %s", ErrSnapshotPart, p.Name, sessionID)
			case err != nil:
				errs[n] = fmt.Errorf("logstore: snapshot of %s: %w", sessionID, err)
			default:
				chunks[n] = e.Value()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var data []byte
	if p.Chunks == 1 {
		data = chunks[0]
	} else {
		data = make([]byte, 0, p.Bytes)
		for _, c := range chunks {
			if len(data)+len(c) > p.Bytes {
				return nil, fmt.Errorf("%w: %s of %s", ErrSnapshotPart, p.Name, sessionID)
			}
			data = append(data, c...)
		}
	}
	if len(data) != p.Bytes || xxhash.Sum64(data) != p.Sum {
		return nil, fmt.Errorf("%w: %s of %s", ErrSnapshotPart, p.Name, sessionID)
	}
	return data, nil
}

func (s *Store) snapshotKV(ctx context.Context) (jetstream.KeyValue, error) {
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	if s.snapshots.kv != nil {
		return s.snapshots.kv, nil
	}
	kv, err := s.js.KeyValue(ctx, SnapshotBucket)
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", SnapshotBucket, err)
	}
	s.snapshots.kv = kv
	return kv, nil
}

// DropSnapshotPart securely deletes a part no head names any more.
func (s *Store) DropSnapshotPart(ctx context.Context, sessionID, name string) error {
	return s.dropKey(ctx, SnapshotBucket, sessionID+"."+name+".>")
}

// DropSnapshot securely deletes the session's snapshot head and every
// part (of any snapshot): an erase, and a writer that wrote one while the
// session was being erased.
func (s *Store) DropSnapshot(ctx context.Context, sessionID string) error {
	if err := s.dropKey(ctx, SnapshotBucket, sessionID); err != nil {
		return err
	}
	return s.dropKey(ctx, SnapshotBucket, sessionID+".>")
}
