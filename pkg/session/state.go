package session

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ReducerVersion changes whenever Apply folds any event differently.
// Read models built by another version are rebuilt. 2: the ids of closed
// items are kept as hashes (the refusal of an event naming one says less
// of it, and a read model's problem message with it).
const ReducerVersion = 2

// Tool call phases.
const (
	PhaseRequested = "requested"
	PhaseStarted   = "started"
	PhaseDone      = "done"
)

// Item is one open or closed piece of work, identified within its session.
type Item struct {
	ID       string `json:"id"`
	TurnID   string `json:"turnId,omitempty"`
	StartSeq uint64 `json:"startSeq"`
	EndSeq   uint64 `json:"endSeq,omitempty"`
}

// Open reports whether the item has not ended.
func (i *Item) Open() bool { return i.EndSeq == 0 }

// ToolCall is a tool call and its phase.
type ToolCall struct {
	Item
	Name       string `json:"name"`
	Idempotent bool   `json:"idempotent,omitempty"`
	Phase      string `json:"phase"`
	StartedSeq uint64 `json:"startedSeq,omitempty"`
	Status     string `json:"status,omitempty"`
}

// Approval is an approval request and its decision.
type Approval struct {
	Item
	ToolCallID string `json:"toolCallId,omitempty"`
	Prompt     string `json:"prompt"`
	Decision   string `json:"decision,omitempty"`
}

// Compaction is a compaction and its outcome.
type Compaction struct {
	Item
	ThroughSeq uint64 `json:"throughSeq"`
	Outcome    string `json:"outcome,omitempty"` // ended / aborted
}

// Rewind is a context/rewound: at Seq, the model's context went back to
// the event at ToSeq.
type Rewind struct {
	Seq       uint64 `json:"seq"`
	ToSeq     uint64 `json:"toSeq"`
	ToEventID string `json:"toEventId"`
}

// Goal is the latest goal/updated.
type Goal struct {
	schema.GoalUpdated
	Seq uint64 `json:"seq"`
}

// Turn is the open or last turn.
type Turn struct {
	Item
	Reason string `json:"reason,omitempty"`
}

// State is the fold of a session's events 1..LastSeq.
type State struct {
	SessionID   string                `json:"sessionId"`
	LastSeq     uint64                `json:"lastSeq"`
	LastEventID string                `json:"lastEventId,omitempty"`
	LastTime    time.Time             `json:"lastTime"`
	CreatedAt   time.Time             `json:"createdAt"`
	Meta        schema.SessionCreated `json:"meta"`

	Paused      bool   `json:"paused,omitempty"`
	PauseReason string `json:"pauseReason,omitempty"`
	Closed      bool   `json:"closed,omitempty"`
	CloseReason string `json:"closeReason,omitempty"`
	// Forking: a fork child whose own fork/committed has not arrived.
	Forking bool `json:"forking,omitempty"`

	Turn     *Turn `json:"turn,omitempty"`     // the open turn
	LastTurn *Turn `json:"lastTurn,omitempty"` // the last ended turn
	Turns    int   `json:"turns"`

	Steps map[string]*Item `json:"steps,omitempty"` // key turnId/stepId, open steps only
	// Attempts of the open turn (key turnId/attemptId): nothing can name
	// an attempt of an ended turn again (events name the open turn, and a
	// turn id is used once), so they go when their turn ends.
	Attempts map[string]*Item `json:"attempts,omitempty"`
	// Tools and Approvals hold those of the open turn and of the last
	// ended one in full (what a client recovering from an interruption
	// reads); those of the turns before are spent (spentTools).
	Tools       map[string]*ToolCall   `json:"tools,omitempty"`
	Approvals   map[string]*Approval   `json:"approvals,omitempty"`
	Compactions map[string]*Compaction `json:"compactions,omitempty"`
	Jobs        map[string]*Item       `json:"jobs,omitempty"`
	Goal        *Goal                  `json:"goal,omitempty"`

	// Summary of the last successful compaction.
	Compacted     *Compaction `json:"compacted,omitempty"`
	Repairs       int         `json:"repairs,omitempty"`
	LastRepairSeq uint64      `json:"lastRepairSeq,omitempty"`
	// Rewinds counts the context/rewound events; LastRewind is the last.
	Rewinds    int     `json:"rewinds,omitempty"`
	LastRewind *Rewind `json:"lastRewind,omitempty"`
	// ForkCommittedSeq is the seq of this session's own fork/committed.
	ForkCommittedSeq uint64 `json:"forkCommittedSeq,omitempty"`

	// usedTurns holds every turn id the session used, spentTools and
	// spentApprovals every tool call and approval of the turns ended
	// before the last one, each by idHash of its id (with the seq that
	// opened it): what the rules still check of them (an id is used once
	// in a session; a refusal says where it was used). A closed item costs
	// a map slot of 16 bytes or less, not its ids, turn and outcome, so
	// the state of a long session stays small (its JSON: snapshots, and
	// the writer's copy per append, read and write it whole).
	usedTurns                  map[uint64]struct{}
	spentTools, spentApprovals map[uint64]uint64
	// open indexes the open attempts, tool calls, approvals, compactions
	// and jobs (key kind/id, value turn id) so the checks that run on
	// every append cost what is open, not the whole history (the maps keep
	// closed items for the uniqueness rules). Apply keeps it up to date;
	// nil means not built (a state decoded from JSON): openIndex builds it.
	// Keyed by struct, not by a "kind/id" string: the commits update it
	// for most events, and a string key would be built (allocated) each
	// time.
	open map[openKey]string
	// keepSpent: endTurn keeps every item in full, as the fold did before
	// items were spent (the tests' reference). forgetSpent: it keeps
	// nothing of them, not even their hashes (NewReader).
	keepSpent, forgetSpent bool
}

// New returns the empty state of a session that has no events.
func New(sessionID string) *State {
	return &State{SessionID: sessionID}
}

// NewReader returns the empty state of a session that has no events, for
// a reader of a log the writer has judged already (an export): it keeps
// nothing of the turns ended before the last, not even the hashes of
// their ids, so it holds what is open and the last ended turn's items
// whatever the session's length. It folds every event as New's state
// does, and refuses what New's refuses but an id used again: a turn id
// of a turn that ended, a tool call's or an approval's of a turn ended
// before the last. Never for a writer.
func NewReader(sessionID string) *State {
	return &State{SessionID: sessionID, forgetSpent: true}
}

// Exists reports whether the session has any event.
func (s *State) Exists() bool { return s.LastSeq > 0 }

func key(turn, id string) string { return turn + "/" + id }

// Clone returns a deep copy (via JSON; states are small).
func (s *State) Clone() *State {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("session: clone: %v", err))
	}
	c, err := UnmarshalState(b)
	if err != nil {
		panic(fmt.Sprintf("session: clone: %v", err))
	}
	return c
}

type stateJSON struct {
	*stateAlias
	// The sets of hashes (State.usedTurns and the spent items): 8 bytes
	// of hash each, then for the spent items 8 of seq, big-endian, in
	// ascending order of hash (a stable checksum of a snapshot), base64.
	UsedTurnHashes []byte `json:"usedTurnHashes,omitempty"`
	SpentTools     []byte `json:"spentToolSeqs,omitempty"`
	SpentApprovals []byte `json:"spentApprovalSeqs,omitempty"`
	oldStateJSON
}

// oldStateJSON is how states were written before the hashes: read, never
// written (a snapshot of an older projector).
type oldStateJSON struct {
	UsedTurns    []string            `json:"usedTurns,omitempty"`
	OldTools     map[string]oldSpent `json:"spentTools,omitempty"`
	OldApprovals map[string]oldSpent `json:"spentApprovals,omitempty"`
}

type oldSpent struct {
	StartSeq uint64 `json:"s"`
}

type stateAlias State

// idHash is what the state keeps of a used id. Two ids of one session
// with the same hash (about one chance in 2^64 for a pair) would refuse
// the second as used; the writer, the projector and every rebuild refuse
// it alike.
func idHash(id string) uint64 { return xxhash.Sum64String(id) }

func appendHashes(dst []byte, set map[uint64]struct{}) []byte {
	hs := slices.Sorted(maps.Keys(set))
	for _, h := range hs {
		dst = binary.BigEndian.AppendUint64(dst, h)
	}
	return dst
}

func appendSeqs(dst []byte, set map[uint64]uint64) []byte {
	hs := slices.Sorted(maps.Keys(set))
	for _, h := range hs {
		dst = binary.BigEndian.AppendUint64(dst, h)
		dst = binary.BigEndian.AppendUint64(dst, set[h])
	}
	return dst
}

// MarshalJSON includes the sets of hashes (kept sorted for a stable
// checksum). A value receiver, so a State marshalled by value keeps them
// too.
func (s State) MarshalJSON() ([]byte, error) {
	j := stateJSON{stateAlias: (*stateAlias)(&s)}
	if len(s.usedTurns) > 0 {
		j.UsedTurnHashes = appendHashes(make([]byte, 0, 8*len(s.usedTurns)), s.usedTurns)
	}
	if len(s.spentTools) > 0 {
		j.SpentTools = appendSeqs(make([]byte, 0, 16*len(s.spentTools)), s.spentTools)
	}
	if len(s.spentApprovals) > 0 {
		j.SpentApprovals = appendSeqs(make([]byte, 0, 16*len(s.spentApprovals)), s.spentApprovals)
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes a state written by MarshalJSON, or by the
// versions before the hashes.
func (s *State) UnmarshalJSON(b []byte) error {
	*s = State{}
	j := stateJSON{stateAlias: (*stateAlias)(s)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.UsedTurnHashes)%8 != 0 || len(j.SpentTools)%16 != 0 || len(j.SpentApprovals)%16 != 0 {
		return errors.New("session: state: a set of hashes of a wrong length")
	}
	if n := len(j.UsedTurnHashes)/8 + len(j.UsedTurns); n > 0 {
		s.usedTurns = make(map[uint64]struct{}, n)
		for h := range slices.Chunk(j.UsedTurnHashes, 8) {
			s.usedTurns[binary.BigEndian.Uint64(h)] = struct{}{}
		}
		for _, t := range j.UsedTurns {
			s.usedTurns[idHash(t)] = struct{}{}
		}
	}
	s.spentTools = readSeqs(j.SpentTools, j.OldTools)
	s.spentApprovals = readSeqs(j.SpentApprovals, j.OldApprovals)
	return nil
}

func readSeqs(b []byte, old map[string]oldSpent) map[uint64]uint64 {
	if len(b) == 0 && len(old) == 0 {
		return nil
	}
	m := make(map[uint64]uint64, len(b)/16+len(old))
	for p := range slices.Chunk(b, 16) {
		m[binary.BigEndian.Uint64(p)] = binary.BigEndian.Uint64(p[8:])
	}
	for id, sp := range old {
		m[idHash(id)] = sp.StartSeq
	}
	return m
}

// binaryMagic begins MarshalBinary's form (version 1).
var binaryMagic = []byte("SLST\x01")

// MarshalBinary is the state's JSON without its sets of hashes, followed by
// them as they are (State.usedTurns, then the spent tool calls and
// approvals, each a count and its 8- or 16-byte records, big-endian): a
// long session's state is mostly those sets, which the JSON carries in
// base64 inside a string (the writer's snapshots use this form).
func (s *State) MarshalBinary() ([]byte, error) {
	js, err := json.Marshal((*stateAlias)(s))
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(binaryMagic)+8+len(js)+24+8*len(s.usedTurns)+16*(len(s.spentTools)+len(s.spentApprovals)))
	b = append(b, binaryMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(js)))
	b = append(b, js...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.usedTurns)))
	b = appendHashes(b, s.usedTurns)
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.spentTools)))
	b = appendSeqs(b, s.spentTools)
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.spentApprovals)))
	b = appendSeqs(b, s.spentApprovals)
	return b, nil
}

// UnmarshalBinary decodes a state written by MarshalBinary.
func (s *State) UnmarshalBinary(b []byte) error {
	bad := errors.New("session: state: not a state in binary form")
	if !bytes.HasPrefix(b, binaryMagic) {
		return bad
	}
	b = b[len(binaryMagic):]
	next := func(size int) ([]byte, bool) {
		if len(b) < 8 {
			return nil, false
		}
		n := binary.BigEndian.Uint64(b)
		if n > uint64(len(b)-8)/uint64(size) {
			return nil, false
		}
		part := b[8 : 8+int(n)*size]
		b = b[8+int(n)*size:]
		return part, true
	}
	js, ok := next(1)
	if !ok {
		return bad
	}
	*s = State{}
	if err := json.Unmarshal(js, (*stateAlias)(s)); err != nil {
		return err
	}
	used, ok1 := next(8)
	tools, ok2 := next(16)
	approvals, ok3 := next(16)
	if !ok1 || !ok2 || !ok3 || len(b) != 0 {
		return bad
	}
	if len(used) > 0 {
		s.usedTurns = make(map[uint64]struct{}, len(used)/8)
		for h := range slices.Chunk(used, 8) {
			s.usedTurns[binary.BigEndian.Uint64(h)] = struct{}{}
		}
	}
	s.spentTools = readSeqs(tools, nil)
	s.spentApprovals = readSeqs(approvals, nil)
	return nil
}

// UnmarshalState decodes a state written by MarshalJSON.
func UnmarshalState(b []byte) (*State, error) {
	s := &State{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenKind names a kind of open work.
type OpenKind string

const (
	OpenTurn           OpenKind = "turn"
	OpenStep           OpenKind = "step"
	OpenAttempt        OpenKind = "attempt"
	OpenToolNotStarted OpenKind = "tool_requested"
	OpenToolStarted    OpenKind = "tool_started"
	OpenApproval       OpenKind = "approval"
	OpenCompaction     OpenKind = "compaction"
	OpenJob            OpenKind = "job"
)

// OpenItem is one piece of open work.
type OpenItem struct {
	Kind     OpenKind `json:"kind"`
	ID       string   `json:"id"`
	TurnID   string   `json:"turnId,omitempty"`
	StartSeq uint64   `json:"startSeq"`
	// Idempotent is set for tool calls whose request said so.
	Idempotent bool `json:"idempotent,omitempty"`
}

// OpenWork lists every open item except the turn itself, ordered by the seq
// that opened it: the deterministic order repairs close them in.
func (s *State) OpenWork() []OpenItem {
	var out []OpenItem
	for _, it := range s.Steps {
		out = append(out, OpenItem{Kind: OpenStep, ID: it.ID, TurnID: it.TurnID, StartSeq: it.StartSeq})
	}
	for _, it := range s.Attempts {
		if !it.Open() {
			continue
		}
		out = append(out, OpenItem{Kind: OpenAttempt, ID: it.ID, TurnID: it.TurnID, StartSeq: it.StartSeq})
	}
	for _, t := range s.Tools {
		switch t.Phase {
		case PhaseRequested:
			out = append(out, OpenItem{Kind: OpenToolNotStarted, ID: t.ID, TurnID: t.TurnID, StartSeq: t.StartSeq, Idempotent: t.Idempotent})
		case PhaseStarted:
			out = append(out, OpenItem{Kind: OpenToolStarted, ID: t.ID, TurnID: t.TurnID, StartSeq: t.StartSeq, Idempotent: t.Idempotent})
		}
	}
	for _, a := range s.Approvals {
		if a.Open() {
			out = append(out, OpenItem{Kind: OpenApproval, ID: a.ID, TurnID: a.TurnID, StartSeq: a.StartSeq})
		}
	}
	for _, c := range s.Compactions {
		if c.Open() {
			out = append(out, OpenItem{Kind: OpenCompaction, ID: c.ID, TurnID: c.TurnID, StartSeq: c.StartSeq})
		}
	}
	for _, j := range s.Jobs {
		if j.Open() {
			out = append(out, OpenItem{Kind: OpenJob, ID: j.ID, TurnID: j.TurnID, StartSeq: j.StartSeq})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].StartSeq != out[j].StartSeq {
			return out[i].StartSeq < out[j].StartSeq
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// HasOpenWork reports whether a turn, step, attempt, tool call, approval,
// compaction or job is open.
func (s *State) HasOpenWork() bool {
	return s.Turn != nil || len(s.Steps) > 0 || len(s.openIndex()) > 0
}

// spentAt reports whether id is in set (State.spentTools or
// spentApprovals: a tool call or approval of a turn ended before the
// last), and the seq that requested it.
func spentAt(set map[uint64]uint64, id string) (uint64, bool) {
	if len(set) == 0 {
		return 0, false
	}
	seq, ok := set[idHash(id)]
	return seq, ok
}

// KnownTool reports whether tool call id was requested in the session.
func (s *State) KnownTool(id string) bool {
	if _, ok := s.Tools[id]; ok {
		return true
	}
	_, ok := spentAt(s.spentTools, id)
	return ok
}

// endTurn drops the attempts of turn t, which ends, and spends the tool
// calls and approvals of the turn that ended before it (every one is
// closed: a turn ends with nothing of it open).
func (s *State) endTurn(t *Turn) {
	if s.keepSpent {
		return
	}
	for k, a := range s.Attempts {
		if a.TurnID == t.ID {
			delete(s.Attempts, k)
		}
	}
	if s.LastTurn == nil {
		return
	}
	prev := s.LastTurn.ID
	for id, tc := range s.Tools {
		if tc.TurnID == prev && !tc.Open() {
			if s.forgetSpent {
				delete(s.Tools, id)
				continue
			}
			if s.spentTools == nil {
				s.spentTools = map[uint64]uint64{}
			}
			s.spentTools[idHash(id)] = tc.StartSeq
			delete(s.Tools, id)
		}
	}
	for id, a := range s.Approvals {
		if a.TurnID == prev && !a.Open() {
			if s.forgetSpent {
				delete(s.Approvals, id)
				continue
			}
			if s.spentApprovals == nil {
				s.spentApprovals = map[uint64]uint64{}
			}
			s.spentApprovals[idHash(id)] = a.StartSeq
			delete(s.Approvals, id)
		}
	}
}

// openKey names an open item in State.open: its kind and id (for an
// attempt, its turn too: attempt ids are unique within a turn).
type openKey struct {
	kind     openKind
	turn, id string
}

type openKind uint8

const (
	openAttempt openKind = iota
	openTool
	openApproval
	openCompaction
	openJob
)

// openIndex returns s.open, building it from the maps if need be.
func (s *State) openIndex() map[openKey]string {
	if s.open != nil {
		return s.open
	}
	s.open = map[openKey]string{}
	for _, a := range s.Attempts {
		if a.Open() {
			s.open[openKey{openAttempt, a.TurnID, a.ID}] = a.TurnID
		}
	}
	for id, t := range s.Tools {
		if t.Phase != PhaseDone {
			s.open[openKey{kind: openTool, id: id}] = t.TurnID
		}
	}
	for id, a := range s.Approvals {
		if a.Open() {
			s.open[openKey{kind: openApproval, id: id}] = a.TurnID
		}
	}
	for id, c := range s.Compactions {
		if c.Open() {
			s.open[openKey{kind: openCompaction, id: id}] = c.TurnID
		}
	}
	for id, j := range s.Jobs {
		if j.Open() {
			s.open[openKey{kind: openJob, id: id}] = j.TurnID
		}
	}
	return s.open
}

// opened records in the open index, if it is built, that the item k of
// turn is open; closed, that it is not. The commits keep it up to date.
func (s *State) opened(k openKey, turn string) {
	if s.open != nil {
		s.open[k] = turn
	}
}

func (s *State) closed(k openKey) {
	if s.open != nil {
		delete(s.open, k)
	}
}

// openInTurn lists what is still open in turn t.
func (s *State) openInTurn(t string) []OpenItem {
	found := false
	for _, turn := range s.openIndex() {
		if turn == t {
			found = true
			break
		}
	}
	for _, st := range s.Steps {
		if st.TurnID == t {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	var out []OpenItem
	for _, it := range s.OpenWork() {
		if it.TurnID == t {
			out = append(out, it)
		}
	}
	return out
}
