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

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// SnapshotBucket holds the writer's snapshots of sessions' folded state
// (DESIGN.md section 2, "Snapshots"): key <session id> is the head (a
// SnapshotHead), keys <session id>.<part>.<n> the chunks of its parts. A
// snapshot is only a shortcut: a reader checks it against the log and
// folds from the start when it does not match.
const SnapshotBucket = "SESSION_SNAPSHOTS"

// SnapshotVersion names what a snapshot's state depends on besides the
// log: the state's binary form (session.State.MarshalBinary), the
// reducer (session.ReducerVersion) and the schema version of the writer
// that folded it. A head of any other version is ignored: the session is
// folded from its start by this reader's rules.
var SnapshotVersion = fmt.Sprintf("state1.reducer%d.schema%d", session.ReducerVersion, schema.Version)

// SnapshotHead is a snapshot's head record.
type SnapshotHead struct {
	// Version is the SnapshotVersion of the writer that wrote it (set by
	// PutSnapshotHead).
	Version string `json:"version"`
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
	if h.Version == "" {
		h.Version = SnapshotVersion
	}
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

// ErrSnapshotMismatch: a snapshot does not match the log, or is of
// another version: it is ignored and the session folded from its start.
var ErrSnapshotMismatch = errors.New("logstore: snapshot does not match the log")

// SnapshotBase is a session's snapshot checked against the log: the
// state it holds and the last event it covers, where a Judge resumes
// (Judge.Last = Tail) to fold the events after it.
type SnapshotBase struct {
	Head  *SnapshotHead
	Tail  Tail
	State *session.State
}

// LoadSnapshot reads the session's snapshot head and state part and
// checks them against the log (DESIGN.md section 2, "Snapshots"): the
// head is of this reader's SnapshotVersion, the stored message at its
// stream seq is on the session's subject, its body has the head's
// ChainHash (the SL-Prev the next event is judged against) and is the
// session's event of the head's seq, the state part reads with its size
// and sum and is the session's state at that event (seq and event id).
// Nil, nil: the session has no snapshot. An error (ErrSnapshotMismatch,
// ErrSnapshotPart, or a read that failed): the snapshot must not be used;
// the caller logs it and folds the session from its start. The events
// after the snapshot are still the judge's to read: a snapshot only
// stands in for the events it covers, which the writer judged and folded.
func (s *Store) LoadSnapshot(ctx context.Context, sessionID string) (*SnapshotBase, error) {
	h, err := s.SnapshotHeadOf(ctx, sessionID)
	if h == nil || err != nil {
		return nil, err
	}
	loc, err := s.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	return CheckSnapshot(sessionID, h, loc,
		func(streamSeq uint64) (*Msg, error) { return s.MsgAt(ctx, loc.Stream, streamSeq) },
		func(p SnapshotPart) ([]byte, error) { return s.SnapshotPartOf(ctx, sessionID, p) })
}

// CheckSnapshot checks the session's snapshot head h against the log by
// LoadSnapshot's rules, for every log that keeps snapshots (this store,
// and internal/memlog for the services' rule scripts): loc is where the
// session is stored, msgAt reads the message at a stream seq of
// loc.Stream (nil: none), part reads a part h names. An error that wraps
// ErrSnapshotMismatch: the snapshot does not match; another error: a read
// failed.
func CheckSnapshot(sessionID string, h *SnapshotHead, loc Location, msgAt func(streamSeq uint64) (*Msg, error), part func(SnapshotPart) ([]byte, error)) (*SnapshotBase, error) {
	mismatch := func(why string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSnapshotMismatch, sessionID, fmt.Sprintf(why, args...))
	}
	if h.Version != SnapshotVersion {
		return nil, mismatch("version %q, this reader's is %q", schema.Clip(h.Version, 64), SnapshotVersion)
	}
	if h.Seq == 0 || h.StreamSeq == 0 {
		return nil, mismatch("it covers no event")
	}
	m, err := msgAt(h.StreamSeq)
	if err != nil {
		return nil, err
	}
	if m == nil || m.Subject != loc.Subject || ChainHash(m.Data) != h.Hash {
		return nil, mismatch("its last event (stream seq %d) is not stored as it says", h.StreamSeq)
	}
	ev, err := schema.Decode(m.Data)
	if err != nil || ev.SessionID != sessionID || ev.Seq != h.Seq {
		return nil, mismatch("its last event (stream seq %d) is not the session's seq %d", h.StreamSeq, h.Seq)
	}
	b, err := part(h.State)
	if err != nil {
		return nil, err
	}
	st := &session.State{}
	if err := st.UnmarshalBinary(b); err != nil {
		return nil, mismatch("its state: %v", err)
	}
	if st.SessionID != sessionID || st.LastSeq != h.Seq || st.LastEventID != ev.EventID {
		return nil, mismatch("its state is not the session's at seq %d", h.Seq)
	}
	return &SnapshotBase{Head: h, State: st, Tail: Tail{Seq: h.Seq, StreamSeq: h.StreamSeq, EventID: ev.EventID, Hash: h.Hash}}, nil
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
	kv, err := s.snapshots.open(ctx, s.js, SnapshotBucket)
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", SnapshotBucket, err)
	}
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
