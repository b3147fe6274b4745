package session

import (
	"fmt"
	"sort"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Safe fork points (DESIGN.md section 8).
//
// Seq k of a session is a safe cut when, after folding events 1..k, no
// turn, step, attempt, tool call, approval, compaction or job is open. Two
// more states are never safe:
//
//   - a fork child that is still being copied (State.Forking): its prefix
//     is not usable yet, so neither is a fork of it. Once its own
//     fork/committed is folded the child has safe points of its own; to cut
//     inside the copied prefix, fork the original parent instead.
//   - session/closed and everything after it: a child's copy would end in
//     a closed session that could take neither its fork/committed nor any
//     new turn. A closed session can still be forked before its close;
//     that is what the default cut does.

// Cut is a requested fork point: Seq, or TurnID (right after that turn's
// turn/ended), or neither (the last safe point).
type Cut struct {
	Seq    *uint64
	TurnID string
}

// String renders the cut for messages.
func (c Cut) String() string {
	switch {
	case c.Seq != nil:
		return fmt.Sprintf("seq %d", *c.Seq)
	case c.TurnID != "":
		return fmt.Sprintf("turn %s", c.TurnID)
	}
	return "the last safe point"
}

// SafePoints folds a session event by event and remembers only what a cut
// needs: the safe seqs and where each turn ended. A 100k-event prefix is
// scanned without holding its events.
type SafePoints struct {
	state    *State
	points   []uint64
	turnEnds map[string]uint64
	// closedAt is the seq of session/closed, 0 if none.
	closedAt uint64
}

// NewSafePoints starts the scan of a session.
func NewSafePoints(sessionID string) *SafePoints {
	return &SafePoints{state: New(sessionID), turnEnds: map[string]uint64{}}
}

// ResumeSafePoints goes on with the scan of a session from st, its state
// folded through st.LastSeq (a snapshot's), which becomes the scan's own
// (the caller must not use it after): the safe
// points and turn ends it knows are those from st.LastSeq on (st.LastSeq
// itself when it is safe), so a cut it resolves is at or after st.LastSeq,
// and one it cannot resolve (refused, or a turn that ended before) may
// resolve before it: only a scan from the start answers that.
func ResumeSafePoints(st *State) *SafePoints {
	p := &SafePoints{state: st, turnEnds: map[string]uint64{}}
	if Safe(p.state) {
		p.points = append(p.points, st.LastSeq)
	}
	return p
}

// Add folds the next event. An event the fold refuses (the stored log
// breaks a rule, or holds an unknown required type) is returned as the
// *schema.Error of State.Apply; the scan cannot go on after it.
func (p *SafePoints) Add(e *schema.Envelope) error {
	if err := p.state.Apply(e); err != nil {
		return err
	}
	s := p.state
	switch e.Type {
	case schema.TypeTurnEnded:
		p.turnEnds[e.TurnID] = s.LastSeq
	case schema.TypeSessionClosed:
		p.closedAt = s.LastSeq
	}
	if Safe(s) {
		p.points = append(p.points, s.LastSeq)
	}
	return nil
}

// Safe reports whether the state's last seq is a safe cut.
func Safe(s *State) bool {
	return s.Exists() && !s.Closed && !s.Forking && !s.HasOpenWork()
}

// State is the fold so far (the caller must not change it).
func (p *SafePoints) State() *State { return p.state }

// Points lists the safe seqs so far, ascending.
func (p *SafePoints) Points() []uint64 { return p.points }

// TurnEnds maps each ended turn's id to the seq of its turn/ended.
func (p *SafePoints) TurnEnds() map[string]uint64 { return p.turnEnds }

// Resolve resolves c against what has been folded so far (see ResolveCut).
func (p *SafePoints) Resolve(c Cut) (uint64, error) {
	s := p.state
	if !s.Exists() {
		return 0, schema.Errorf(schema.CodeNotFound, "session %s has no events", s.SessionID)
	}
	if s.Forking {
		return 0, schema.Errorf(schema.CodeForking, "session %s is a fork still being copied: it can be forked after its fork/committed", s.SessionID)
	}
	if c.TurnID != "" && c.Seq == nil && s.Turn != nil && s.Turn.ID == c.TurnID {
		// Cutting after a turn that is still open is cutting inside it.
		var before *uint64
		if i := sort.Search(len(p.points), func(i int) bool { return p.points[i] >= s.Turn.StartSeq }); i > 0 {
			v := p.points[i-1]
			before = &v
		}
		return 0, unsafeCut(fmt.Sprintf("turn %s is still open (since seq %d): it is not a safe cut", c.TurnID, s.Turn.StartSeq), before, nil)
	}
	k, err := ResolveCut(p.points, p.turnEnds, s.LastSeq, c)
	if err != nil && p.closedAt != 0 && schema.CodeOf(err) == schema.CodeUnsafeCut {
		if c.Seq != nil && *c.Seq >= p.closedAt || c.TurnID != "" && p.turnEnds[c.TurnID] >= p.closedAt {
			e := err.(*schema.Error)
			e.Message = fmt.Sprintf("%s: the session was closed at seq %d and a fork cannot include the close; cut before it", e.Message, p.closedAt)
		}
	}
	return k, err
}

// Decided reports whether folding more events cannot change what Resolve
// returns for c, so a scan for c may stop early. A cut at a seq or turn is
// decided once that point is folded and is either safe or followed by a
// safe point (the nearest one after it); the default cut needs the tail.
func (p *SafePoints) Decided(c Cut) bool {
	var k uint64
	switch {
	case c.Seq != nil:
		k = *c.Seq
	case c.TurnID != "":
		var ok bool
		if k, ok = p.turnEnds[c.TurnID]; !ok {
			return false
		}
	default:
		return false
	}
	if p.state.LastSeq < k || len(p.points) == 0 {
		return false
	}
	return p.points[len(p.points)-1] >= k
}

// ListSafePoints returns the safe seqs of a whole session.
func ListSafePoints(events []schema.Envelope) ([]uint64, error) {
	if len(events) == 0 {
		return nil, nil
	}
	p := NewSafePoints(events[0].SessionID)
	for i := range events {
		if err := p.Add(&events[i]); err != nil {
			return p.points, err
		}
	}
	return p.points, nil
}

// ResolveCut returns the seq a fork copies through. points are the safe
// seqs (ascending), turnEnds the seq of each ended turn's turn/ended, and
// lastSeq the session's last seq. No cut means the last safe point. A cut
// that is not safe is refused with code unsafe_cut and the nearest safe
// seqs before and after it (nil where there is none); a seq beyond the
// session or a turn it never had is bad_request.
func ResolveCut(points []uint64, turnEnds map[string]uint64, lastSeq uint64, c Cut) (uint64, error) {
	if c.Seq != nil && c.TurnID != "" {
		return 0, schema.Errorf(schema.CodeBadRequest, "a cut is a seq or a turn id, not both")
	}
	if c.Seq == nil && c.TurnID == "" {
		if len(points) == 0 {
			return 0, unsafeCut(fmt.Sprintf("no seq up to %d is a safe cut", lastSeq), nil, nil)
		}
		return points[len(points)-1], nil
	}
	var k uint64
	what := c.String()
	if c.Seq != nil {
		k = *c.Seq
		if k == 0 {
			return 0, schema.Errorf(schema.CodeBadRequest, "cut seq must be >= 1")
		}
		if k > lastSeq {
			return 0, schema.Errorf(schema.CodeBadRequest, "cut seq %d is beyond the session's last seq %d", k, lastSeq)
		}
	} else {
		var ok bool
		if k, ok = turnEnds[c.TurnID]; !ok {
			// A turn that started but has not ended is still open: the
			// nearest safe seqs are the answer. One never seen is a
			// mistake of the request.
			return 0, schema.Errorf(schema.CodeBadRequest, "turn %s has not ended in this session (its last seq is %d)", c.TurnID, lastSeq)
		}
		what = fmt.Sprintf("turn %s (ended at seq %d)", c.TurnID, k)
	}
	i := sort.Search(len(points), func(i int) bool { return points[i] >= k })
	if i < len(points) && points[i] == k {
		return k, nil
	}
	var before, after *uint64
	if i > 0 {
		v := points[i-1]
		before = &v
	}
	if i < len(points) {
		v := points[i]
		after = &v
	}
	return 0, unsafeCut(fmt.Sprintf("%s is not a safe cut: work is open there", what), before, after)
}

func unsafeCut(msg string, before, after *uint64) *schema.Error {
	e := schema.Errorf(schema.CodeUnsafeCut, "%s", msg)
	e.NearestSafeBefore, e.NearestSafeAfter = before, after
	if before != nil || after != nil {
		e.Message += " (nearest safe:"
		if before != nil {
			e.Message += fmt.Sprintf(" before %d", *before)
		}
		if after != nil {
			e.Message += fmt.Sprintf(" after %d", *after)
		}
		e.Message += ")"
	}
	return e
}
