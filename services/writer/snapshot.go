package writer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// A snapshot (logstore.SnapshotHead) holds the session's folded state in
// its binary form (session.State.MarshalBinary; part s<stream seq>,
// rewritten by every snapshot) and the ids of its events 1..Seq in parts
// written once each (i<stream seq>: the ids of the events after the
// snapshot before), each a list of idRecSize-byte records, xxhash64 of
// the event id then the stream seq of its event, big-endian, ascending. A
// loaded entry keeps those parts as they are and looks ids up in them by
// binary search (entry.candidates): a million ids are 16 MB read and
// kept, nothing rebuilt.
const idRecSize = 16

// idRec is an id record of a part not written yet.
type idRec struct{ hash, streamSeq uint64 }

func idHash(eventID string) uint64 { return xxhash.Sum64String(eventID) }

// encodeIDs sorts recs and encodes them as a part.
func encodeIDs(recs []idRec) []byte {
	slices.SortFunc(recs, func(a, b idRec) int {
		if c := cmpU64(a.hash, b.hash); c != 0 {
			return c
		}
		return cmpU64(a.streamSeq, b.streamSeq)
	})
	b := make([]byte, 0, idRecSize*len(recs))
	for _, r := range recs {
		b = binary.BigEndian.AppendUint64(b, r.hash)
		b = binary.BigEndian.AppendUint64(b, r.streamSeq)
	}
	return b
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// snapCandidates appends to dst the stream seqs that part (an id part)
// holds for hash h.
func snapCandidates(dst []uint64, part []byte, h uint64) []uint64 {
	n := len(part) / idRecSize
	at := func(i int) uint64 { return binary.BigEndian.Uint64(part[i*idRecSize:]) }
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if at(mid) < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for i := lo; i < n && at(i) == h; i++ {
		dst = append(dst, binary.BigEndian.Uint64(part[i*idRecSize+8:]))
	}
	return dst
}

// snapDue reports whether the entry's session gained SnapshotEvery events
// since the snapshot it was loaded from or last began, with none being
// written: then snapshot starts one.
func (s *Service) snapDue(e *entry) bool {
	return s.cfg.SnapshotEvery > 0 && e.tail.Seq >= e.snapSeq+uint64(s.cfg.SnapshotEvery) &&
		!e.snapping.Load() && !e.snapFailed.Load()
}

// snapshot starts writing the entry's snapshot in the background. It runs
// under the session's lock after an append and takes of the entry what
// the snapshot stores (the state's encoding: the state changes with the next
// append; the ids indexed since the last snapshot); sorting the ids and
// the stores happen after the reply.
func (s *Service) snapshot(sessionID string, e *entry) {
	st, err := e.state.MarshalBinary()
	if err != nil {
		s.log.Error("writer: snapshot", "session", sessionID, "err", err)
		e.snapFailed.Store(true)
		return
	}
	var prev logstore.SnapshotHead
	if p := e.snapStored.Load(); p != nil {
		prev = *p
	}
	head := logstore.SnapshotHead{Seq: e.tail.Seq, StreamSeq: e.tail.StreamSeq, Hash: e.tail.Hash}
	pending := e.pending
	e.pending, e.snapSeq = nil, e.tail.Seq
	e.snapping.Store(true)
	s.snaps.Add(1)
	go func() {
		defer s.snaps.Done()
		defer e.snapping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.writeSnapshot(ctx, sessionID, prev, &head, st, encodeIDs(pending)); err != nil {
			// The stored head is still the one before (or none): this
			// entry has lost the ids it held for the next one, so it
			// writes none until it is loaded again.
			e.snapFailed.Store(true)
			s.m.snapshots.WithLabelValues("error").Inc()
			s.log.Warn("writer: snapshot not stored", "session", sessionID, "seq", head.Seq, "err", err)
			return
		}
		e.snapStored.Store(&head)
		s.m.snapshots.WithLabelValues("ok").Inc()
	}()
}

// writeSnapshot stores the parts, then the head, then drops the state
// part of the snapshot before. A session whose erasure began meanwhile
// loses the snapshot again: the erase may have dropped its records
// before this write.
func (s *Service) writeSnapshot(ctx context.Context, sessionID string, prev logstore.SnapshotHead, head *logstore.SnapshotHead, st, ids []byte) error {
	gen := strconv.FormatUint(head.StreamSeq, 10)
	part, err := s.st.PutSnapshotPart(ctx, sessionID, "i"+gen, ids)
	if err != nil {
		return err
	}
	head.IDs = append(slices.Clip(prev.IDs), part)
	if head.State, err = s.st.PutSnapshotPart(ctx, sessionID, "s"+gen, st); err != nil {
		return err
	}
	if err := s.st.PutSnapshotHead(ctx, sessionID, *head); err != nil {
		return err
	}
	if prev.State.Name != "" && prev.State.Name != head.State.Name {
		if err := s.st.DropSnapshotPart(ctx, sessionID, prev.State.Name); err != nil {
			s.log.Warn("writer: snapshot: old state part not dropped", "session", sessionID, "err", err)
		}
	}
	if erased, err := s.st.Erased(ctx, sessionID); erased || err != nil {
		return errors.Join(err, s.st.DropSnapshot(ctx, sessionID))
	}
	return nil
}

// loadSnapshot builds the session's entry from its snapshot, when it has
// one that matches the log (logstore.LoadSnapshot's checks) and whose id
// parts read. Nil (and the reason, logged) otherwise: the caller folds
// from the start.
func (s *Service) loadSnapshot(ctx context.Context, sessionID string) (*entry, error) {
	base, err := s.st.LoadSnapshot(ctx, sessionID)
	if base == nil || err != nil {
		return nil, err
	}
	h := base.Head
	e := newEntry(sessionID)
	e.state, e.snapSeq = base.State, h.Seq
	e.snapStored.Store(h)
	e.tail = base.Tail
	ids := 0
	for _, p := range h.IDs {
		b, err := s.st.SnapshotPartOf(ctx, sessionID, p)
		if err != nil {
			return nil, err
		}
		if len(b)%idRecSize != 0 || !sortedIDs(b) {
			return nil, errors.New("an id part of the snapshot is not sorted records")
		}
		e.snapIDs = append(e.snapIDs, b)
		ids += len(b) / idRecSize
	}
	// One id per event 1..Seq (copies are not indexed): a head that
	// lists fewer parts would leave stored ids unknown.
	if ids != int(h.Seq) {
		return nil, fmt.Errorf("the snapshot's id parts hold %d ids for %d events", ids, h.Seq)
	}
	return e, nil
}

// sortedIDs reports whether an id part's records ascend by hash (binary
// search needs no more).
func sortedIDs(b []byte) bool {
	prev := uint64(0)
	for i := 0; i+idRecSize <= len(b); i += idRecSize {
		h := binary.BigEndian.Uint64(b[i:])
		if h < prev {
			return false
		}
		prev = h
	}
	return true
}
