package projector

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// entry is the in-memory form of one session: its summary as stored, the
// fold state (nil once folding stopped: unreadable or gap), and what of it
// the store holds already, so a batch writes only what changed and keeps
// the checksum incremental.
type entry struct {
	id  string
	sum store.Summary
	st  *session.State

	stored []byte // summary JSON in the store (nil: none)
	// chain is the hash of the last folded event's body (the zero sum:
	// unknown), which flush spells into sum.LastHash.
	chain      logstore.ChainSum
	idxStatus  string // status and time under which the index keys are stored
	idxTime    uint64
	indexed    bool
	compaction []byte // vc value in the store (nil: none)
	// idxAgents are the agents in whose indexes the session's index keys
	// are stored (readers, as of the last flush or load).
	idxAgents []string
	// terms are the search terms indexed in the session (search.go), by
	// their termHash: no pointers for the collector to follow and no
	// string compared on a lookup (one per word folded).
	terms     termHashes
	snapSeq   uint64 // LastSeq of the stored snapshot
	snapBytes int    // its size
	// committed is the stream seq of the last event of the session in
	// the committed views (LastStreamSeq as of the last flush or load).
	committed uint64
	dirty     bool
	elem      *list.Element
	// ids are the turn, step, attempt and tool call ids of the events
	// folded last that named one (own).
	ids [4]string
}

func (e *entry) stopped() bool { return e.st == nil }

// own gives the event id and ids of ev, views of its message's buffer
// (DecodeCanonicalViewOf), strings of their own, which the fold state may
// keep: an id that the session's last event to name one named too is
// that string (a turn's id is copied once, not per event of the turn).
func (en *entry) own(ev *schema.Envelope) {
	ev.EventID = strings.Clone(ev.EventID)
	en.ownID(&ev.TurnID, 0)
	en.ownID(&ev.StepID, 1)
	en.ownID(&ev.AttemptID, 2)
	en.ownID(&ev.ToolCallID, 3)
}

func (en *entry) ownID(id *string, k int) {
	switch s := *id; {
	case s == "":
	case s == en.ids[k]:
		*id = en.ids[k]
	default:
		s = strings.Clone(s)
		*id, en.ids[k] = s, s
	}
}

// snapshot is the internal fold-state record: enough to continue folding
// a session after a restart or an eviction without reading it all again.
// Snapshots are not views (not checksummed); they may lag the summary by
// up to SnapshotEvery events (more during a catch-up, see
// snapshotInterval), which the folder re-reads from the log.
type snapshot struct {
	LastSeq   uint64          `json:"lastSeq"`
	StreamSeq uint64          `json:"streamSeq"`
	State     json.RawMessage `json:"state"`
	// TermHashes are the search terms indexed up to LastSeq (entry.terms),
	// 8 bytes each, big-endian, in ascending order. Terms is how snapshots
	// written before held them (restored, not written).
	TermHashes []byte   `json:"termHashes,omitempty"`
	Terms      []string `json:"terms,omitempty"`
}

// foldLog is what the fold reads of the log besides the messages its
// consumers deliver: a session's stored messages after a position (a
// gap's fill, the restore of many events) and one message by its stream
// seq (the restore of a few). logstore.Store is it on JetStream; the
// rule scripts fold on internal/memlog through it too.
type foldLog interface {
	ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error)
	Locate(sessionID string) (logstore.Location, error)
	MsgAt(ctx context.Context, stream string, seq uint64) (*logstore.Msg, error)
}

var _ foldLog = (*logstore.Store)(nil)

// folder folds stream messages into batches of view changes. It is used
// by one goroutine only.
type folder struct {
	db  *store.DB
	ls  foldLog
	met *metrics
	// observe, if set, sees each event folded (Config.Observer).
	observe func(ev *schema.Envelope, streamSeq uint64)

	cache    map[string]*entry
	lru      *list.List
	capacity int
	snapEach uint64

	batch  *store.Batch
	dirty  []*entry
	events int // events folded into the open batch
	bytes  int // message bytes folded into the open batch
	// lastBatch is the encoded size of the last committed batch: the next
	// one is allocated at that size rather than grown to it.
	lastBatch int
	scratch   []byte
	// jdg is the judge of the message being folded (judgeOf): kept here,
	// where a judge made per message escaped to the heap (an allocation
	// per event).
	jdg   logstore.Judge
	terms termSet // of the event being indexed (indexSearch)
	text  []byte  // the unquoted text of the message being indexed
	// catchingUp: the projector has not yet reached the stream's end as
	// it was at start (snapshots further apart, see snapshotInterval).
	catchingUp bool
	// pos is the position reached in each stream; cur is the one of the
	// stream of the last message folded, and curHeader that message's
	// header: its ID (msgIdentity, a header lookup) is named when a
	// checkpoint is taken (settlePos), not per event.
	pos       map[string]*store.StreamPos
	cur       *store.StreamPos
	curHeader nats.Header
	// skip, if set, says a session is erased: its events are not folded.
	skip func(id string) bool

	// inflight is the last flushed batch while Pebble commits it on
	// another goroutine (nil once landed), inflightEvents its events.
	// The folder reads the store only after it has landed (landed): a
	// session evicted from the cache while its last changes are in the
	// batch must not be reloaded from the views before them.
	inflight       *store.Pending
	inflightEvents int
	// onLanded, if set, is told the checkpoint of each batch that landed.
	onLanded func(store.Checkpoint)
	// waiting, if set, is called when the folder is about to wait for a
	// batch still in flight (tests: HoldCommits).
	waiting func()
}

// landed waits for the batch in flight, if any. Every read of the store
// by the folder comes after it.
func (f *folder) landed() error {
	p := f.inflight
	if p == nil {
		return nil
	}
	if f.waiting != nil {
		select {
		case <-p.Done():
		default:
			f.waiting()
		}
	}
	cp, err := p.Wait()
	f.inflight = nil
	if err != nil {
		return err
	}
	f.met.applied.Add(float64(f.inflightEvents))
	f.inflightEvents = 0
	if f.onLanded != nil {
		f.onLanded(cp)
	}
	return nil
}

// forget drops a session from the cache (its views are being erased).
func (f *folder) forget(id string) {
	if en, ok := f.cache[id]; ok {
		f.lru.Remove(en.elem)
		delete(f.cache, id)
	}
}

func newFolder(db *store.DB, ls foldLog, met *metrics, capacity, snapEach int, pos []store.StreamPos) *folder {
	f := &folder{
		db: db, ls: ls, met: met,
		cache: map[string]*entry{}, lru: list.New(), capacity: capacity, snapEach: uint64(snapEach),
		pos: map[string]*store.StreamPos{}, catchingUp: true,
	}
	for _, p := range pos {
		f.pos[p.Name] = &p
	}
	return f
}

func (f *folder) open() *store.Batch {
	if f.batch == nil {
		f.batch = f.db.NewBatchWithSize(f.lastBatch + f.lastBatch/8)
	}
	return f.batch
}

// checkpoint is the position the open batch reaches.
func (f *folder) checkpoint() store.Checkpoint {
	f.settlePos()
	cp := store.Checkpoint{Version: Version()}
	for _, name := range slices.Sorted(maps.Keys(f.pos)) {
		cp.Streams = append(cp.Streams, *f.pos[name])
	}
	return cp
}

// settlePos names the message last folded in f.cur by its identity.
func (f *folder) settlePos() {
	if f.cur != nil && f.curHeader != nil {
		f.cur.ID = msgIdentity(f.cur.Subject, f.curHeader)
		f.curHeader = nil
	}
}

// at moves the position of m's stream to m.
func (f *folder) at(m *msg) {
	p := f.cur
	if p == nil || p.Name != m.stream {
		f.settlePos()
		if p = f.pos[m.stream]; p == nil {
			p = &store.StreamPos{Name: m.stream}
			f.pos[m.stream] = p
		}
		f.cur = p
	}
	p.Seq = m.streamSeq
	p.Subject = m.subject
	// A message without a header is named by its subject.
	p.ID, f.curHeader = m.subject, m.header
}

// msg is one stored event as delivered by the consumer.
type msg struct {
	stream    string
	streamSeq uint64
	subject   string
	header    nats.Header
	data      []byte
	pending   uint64
	// unopened: a sealed body that does not open (logstore.Msg.Unopened);
	// data is nil and the message reads as a body that does not decode.
	unopened error
	// What prepare reads from the above, when prepared is set: the
	// session of the subject and the decoded body (its data is data's
	// bytes: data is the message's own buffer, never changed). The seq
	// header is the judge's to read. A canonical body's event id and ids
	// are views of data too, until handle has the fold own them.
	id       string
	idOK     bool
	ev       schema.Envelope
	decErr   error
	prepared bool
	// canonical: the body is exactly what schema.Encode writes for ev.
	canonical bool
}

// prepare reads the session and the body of m. It needs
// nothing of the folder, so the consumer's goroutine runs it.
func (m *msg) prepare() {
	m.id, m.idOK = logstore.SessionFromSubject(m.subject)
	m.ev, m.canonical, m.decErr = schema.DecodeCanonicalViewOf(m.data, m.id)
	if m.unopened != nil {
		m.decErr = m.unopened
	}
	m.prepared = true
}

// handle folds one message of the stream. Errors are internal (store or
// log failures): what a session holds never fails the projector.
func (f *folder) handle(ctx context.Context, m *msg) error {
	f.at(m)
	f.bytes += len(m.data)
	f.open()

	if !m.prepared {
		m.prepare()
	}
	id := m.id
	if !m.idOK {
		f.met.skipped.WithLabelValues("bad_subject").Inc()
		return nil
	}
	if f.skip != nil && f.skip(id) {
		f.met.skipped.WithLabelValues("erased").Inc() // erase.go
		return nil
	}
	en, err := f.load(ctx, id)
	if err != nil {
		return err
	}
	if en.stopped() {
		f.met.skipped.WithLabelValues("stopped").Inc()
		return nil
	}
	if m.streamSeq <= en.sum.LastStreamSeq {
		// Folded already: a gap fill read it before the consumer did.
		f.met.skipped.WithLabelValues("duplicate").Inc()
		return nil
	}
	lm := &logstore.Msg{StreamSeq: m.streamSeq, Header: m.header, Data: m.data}
	ev, sum, gap := f.judge(en, lm, &m.ev, m.decErr)
	if ev == nil {
		return nil
	}
	if gap {
		if err := f.fillGap(ctx, en, m.streamSeq); err != nil {
			return err
		}
		if en.stopped() {
			return nil
		}
		// Judged again after the events the fill folded: the next event
		// now, a copy or a forgery of one it folded, or still a gap.
		if ev, sum, gap = f.judge(en, lm, ev, nil); ev == nil {
			return nil
		}
		if gap {
			j := f.judgeOf(en)
			_, err := j.Judged(lm, ev, nil)
			f.stop(en, StatusGap, &store.Problem{Seq: en.st.LastSeq + 1, StreamSeq: m.streamSeq, Code: StatusGap, GotSeq: ev.Seq, Message: err.Error()})
			return nil
		}
	}
	if m.canonical {
		// Its ids are views of m.data, which the fold does not keep.
		en.own(ev)
	}
	f.apply(en, ev, m.streamSeq, sum, m.canonical)
	return nil
}

// judge gives the verdict of logstore.Judge on a stored message of a
// folding session (DESIGN.md section 5): the session's next event (ev,
// with the hash of its body), a stored copy of the event folded last (nil:
// skipped), one that skips ahead (gap: the caller fills or marks the gap),
// or anything else, which stops the session unreadable (nil).
func (f *folder) judge(en *entry, m *logstore.Msg, ev *schema.Envelope, decErr error) (_ *schema.Envelope, sum logstore.ChainSum, gap bool) {
	j := f.judgeOf(en)
	v, err := j.Judged(m, ev, decErr)
	switch v {
	case logstore.VerdictOK:
		return ev, j.LastSum, false
	case logstore.VerdictCopy:
		// Folded as far as the copy: readers of the views (judgeStored)
		// take it as vouched for.
		f.met.skipped.WithLabelValues("duplicate").Inc()
		en.sum.LastStreamSeq = m.StreamSeq
		f.markDirty(en)
		return nil, sum, false
	}
	var ue *logstore.UnreadableError
	if errors.As(err, &ue) && ue.Kind == logstore.KindGap {
		return ev, sum, true
	}
	got := uint64(0)
	if ue != nil {
		got = otherSeq(ue.GotSeq, en.st.LastSeq+1)
	}
	f.unreadable(en, m.StreamSeq, got, err.Error())
	return nil, sum, false
}

// judgeOf is the judge of the message after the last event folded into
// en: the folder's (f.jdg), valid until the next call.
func (f *folder) judgeOf(en *entry) *logstore.Judge {
	f.jdg = logstore.Judge{SessionID: en.id, Unspelled: true, LastSum: en.chain,
		Last: logstore.Tail{Seq: en.st.LastSeq, StreamSeq: en.sum.LastStreamSeq, EventID: en.st.LastEventID}}
	return &f.jdg
}

func otherSeq(got, next uint64) uint64 {
	if got == next {
		return 0
	}
	return got
}

// unreadable stops a session at the message at streamSeq. The problem's
// seq is the position where folding stopped; got is the seq the message
// claims when that is another one.
func (f *folder) unreadable(en *entry, streamSeq, got uint64, msg string) {
	f.stop(en, StatusUnreadable, &store.Problem{Seq: en.st.LastSeq + 1, StreamSeq: streamSeq, Code: string(schema.CodeUnreadable), GotSeq: got, Message: msg})
}

// apply folds one event the judge found the session's next into en;
// sum is the ChainSum of its stored body, canonical whether that body is
// what schema.Encode writes for ev.
func (f *folder) apply(en *entry, ev *schema.Envelope, streamSeq uint64, sum logstore.ChainSum, canonical bool) {
	if err := en.st.Apply(ev); err != nil {
		code := schema.CodeOf(err)
		if code == schema.CodeUnknownType {
			code = schema.CodeUnreadable
		}
		f.stop(en, StatusUnreadable, &store.Problem{Seq: ev.Seq, StreamSeq: streamSeq, Code: string(code), Message: err.Error()})
		return
	}
	b := f.batch
	// The batch copies key and value: one scratch buffer serves them all.
	f.scratch = store.AppendEventKey(f.scratch[:0], en.id, ev.Seq)
	k := len(f.scratch)
	f.scratch = store.AppendEventValue(f.scratch, streamSeq, ev, canonical)
	b.Set(f.scratch[:k], nil, f.scratch[k:])
	f.dashboard(en, ev)
	en.sum.LastStreamSeq = streamSeq
	en.chain = sum
	en.sum.LastType = ev.Type
	switch ev.Type {
	case schema.TypeSessionCreated:
		if p := en.st.Meta.Parent; p != nil {
			b.Set(store.ChildKey(p.SessionID, en.id), nil, []byte{})
		}
	case schema.TypeCompactionEnded:
		var d schema.CompactionEnded
		if ev.DecodeData(&d) == nil {
			v, _ := json.Marshal(store.CompactionSummary{CompactionID: d.CompactionID, ThroughSeq: d.ThroughSeq, EndSeq: ev.Seq, Summary: d.Summary})
			b.Set(store.CompactionKey(en.id), en.compaction, v)
			en.compaction = v
		}
	}
	f.events++
	f.markDirty(en)
	if f.observe != nil {
		f.observe(ev, streamSeq)
	}
}

// stop ends folding of a session: its views keep what the last foldable
// event made of them; only the status and the problem change.
func (f *folder) stop(en *entry, status string, p *store.Problem) {
	if en.st != nil {
		derive(&en.sum, en.st)
	}
	en.st = nil
	en.sum.Status = status
	en.sum.Problem = p
	f.met.marked.WithLabelValues(status).Inc()
	f.markDirty(en)
}

func (f *folder) markDirty(en *entry) {
	if !en.dirty {
		en.dirty = true
		f.dirty = append(f.dirty, en)
	}
}

// fillGap reads the session's events stored after the last folded one and
// before the message that skipped ahead, and folds those that continue the
// sequence. The read is bounded by the current stream position so that a
// rebuild of the same stream prefix decides the same way.
func (f *folder) fillGap(ctx context.Context, en *entry, before uint64) error {
	_, err := f.ls.ReadSession(ctx, en.id, en.sum.LastStreamSeq, func(m *logstore.Msg) error {
		if m.StreamSeq >= before || en.stopped() {
			return logstore.ErrStop
		}
		if m.StreamSeq <= en.sum.LastStreamSeq {
			return nil
		}
		dec, canonical, decErr := schema.DecodeCanonical(m.Data)
		ev, sum, gap := f.judge(en, m, &dec, decErr)
		if ev == nil || gap {
			// A stored message that skips ahead too: the gap is before it.
			return nil
		}
		f.apply(en, ev, m.StreamSeq, sum, canonical)
		return nil
	})
	if err != nil {
		return fmt.Errorf("projector: gap fill %s: %w", en.id, err)
	}
	return nil
}

// load returns the session's entry from the cache or the store.
func (f *folder) load(ctx context.Context, id string) (*entry, error) {
	if en, ok := f.cache[id]; ok {
		// Not moved to the front here: flush moves the batch's dirty
		// entries there, before it evicts (once per batch, not per event).
		return en, nil
	}
	if err := f.landed(); err != nil {
		return nil, err
	}
	en := &entry{id: id}
	v, found, err := f.db.Get(store.SummaryKey(id))
	if err != nil {
		return nil, err
	}
	if !found {
		en.st = session.New(id)
		en.sum.SessionID = id
	} else {
		if err := store.DecodeSummary(v, &en.sum); err != nil {
			return nil, fmt.Errorf("projector: summary %s: %w", id, err)
		}
		en.stored = v
		en.chain, _ = logstore.ParseChainSum(en.sum.LastHash)
		en.committed = en.sum.LastStreamSeq
		en.idxStatus, en.idxTime, en.indexed = en.sum.Status, store.TimeKey(en.sum.LastActivity), true
		en.idxAgents = readers(id, &en.sum)
		if en.compaction, _, err = f.db.Get(store.CompactionKey(id)); err != nil {
			return nil, err
		}
		if en.sum.Status != StatusUnreadable && en.sum.Status != StatusGap {
			if err := f.restore(ctx, en); err != nil {
				return nil, err
			}
		}
	}
	en.elem = f.lru.PushFront(en)
	f.cache[id] = en
	return en, nil
}

// restore rebuilds the fold state of a stored session: its snapshot plus
// the events after it up to the summary's last seq, read from the log.
func (f *folder) restore(ctx context.Context, en *entry) error {
	en.st = session.New(en.id)
	v, found, err := f.db.Get(store.SnapshotKey(en.id))
	if err != nil {
		return err
	}
	if found {
		var sn snapshot
		if err := json.Unmarshal(v, &sn); err != nil {
			return fmt.Errorf("projector: snapshot %s: %w", en.id, err)
		}
		st, err := session.UnmarshalState(sn.State)
		if err != nil {
			return fmt.Errorf("projector: snapshot %s: %w", en.id, err)
		}
		if sn.LastSeq <= en.sum.LastSeq {
			en.st, en.snapSeq, en.snapBytes = st, sn.LastSeq, len(v)
			for _, t := range sn.Terms {
				en.noteTerm(termHash([]byte(t)))
			}
			for h := range slices.Chunk(sn.TermHashes, 8) {
				if len(h) == 8 {
					en.noteTerm(binary.BigEndian.Uint64(h))
				}
			}
		}
	}
	if en.st.LastSeq == en.sum.LastSeq {
		return nil
	}
	f.met.restores.Inc()
	// The event index holds the stream seq of every folded event, so the
	// few events after the snapshot are read by position from the stream
	// leader: no consumer to create per session.
	seqs, err := f.db.StreamSeqs(en.id, en.st.LastSeq+1, en.sum.LastSeq)
	if err != nil {
		return err
	}
	refold := func(m *logstore.Msg) error {
		ev, err := schema.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("projector: restore %s: %w", en.id, err)
		}
		if err := en.st.Apply(&ev); err != nil {
			return fmt.Errorf("projector: restore %s: seq %d folded before but not now: %w", en.id, ev.Seq, err)
		}
		f.indexSearch(en, &ev, false)
		return nil
	}
	if len(seqs) > restoreByLeaderReads && slices.IsSorted(seqs) {
		// Many events (snapshots of long sessions are further apart):
		// one read of the session's subject beats a request per event.
		// It delivers the session's messages in stream order, of which
		// the index names those folded.
		i := 0
		_, err := f.ls.ReadSession(ctx, en.id, seqs[0]-1, func(m *logstore.Msg) error {
			switch {
			case m.StreamSeq < seqs[i]:
				return nil
			case m.StreamSeq > seqs[i]:
				return fmt.Errorf("projector: restore %s: stream seq %d is gone", en.id, seqs[i])
			}
			if err := refold(m); err != nil {
				return err
			}
			if i++; i == len(seqs) {
				return logstore.ErrStop
			}
			return nil
		})
		if err == nil && i < len(seqs) {
			err = fmt.Errorf("projector: restore %s: stream seq %d is gone", en.id, seqs[i])
		}
		if err != nil {
			return err
		}
	} else {
		loc, err := f.ls.Locate(en.id)
		if err != nil {
			return err
		}
		for _, ss := range seqs {
			m, err := f.ls.MsgAt(ctx, loc.Stream, ss)
			if err != nil {
				return fmt.Errorf("projector: restore %s: %w", en.id, err)
			}
			if m == nil {
				return fmt.Errorf("projector: restore %s: stream seq %d is gone", en.id, ss)
			}
			if err := refold(m); err != nil {
				return err
			}
		}
	}
	if en.st.LastSeq != en.sum.LastSeq {
		return fmt.Errorf("projector: restore %s: the index reaches seq %d, the view says %d", en.id, en.st.LastSeq, en.sum.LastSeq)
	}
	return nil
}

// Snapshot spacing. A session's fold state keeps its whole history of
// attempts, tool calls and compactions (the uniqueness rules need it), so
// it grows with the session: at a fixed spacing the snapshots of a long
// session cost more bytes per event than the events themselves, and a
// catch-up's snapshots grow with the square of the sessions' length. So
// while catching up the spacing grows with the state: a snapshot costs at
// most about snapshotBytesPerEvent bytes per event folded since the last
// one, never closer than SnapshotEvery events, never further apart than
// maxSnapshotInterval. The batch that catches up writes the snapshot of
// every cached session SnapshotEvery or more behind (settle), and from
// then on the spacing is SnapshotEvery: the restore after a restart or an
// eviction re-reads as few events as before. Only a crash during the
// catch-up leaves restores of up to maxSnapshotInterval events. At 64
// bytes per event, encoding the snapshots of a 1,000,000-event catch-up
// (sessions of 1,000 events, states of a few KiB) took 4% of its CPU, and
// their bytes a share of Pebble's compactions; at 16 a quarter of that.
const (
	snapshotBytesPerEvent = 16
	maxSnapshotInterval   = 1024
	// restoreByLeaderReads: up to this many events, a restore reads each
	// by its stream seq; beyond, through a consumer on the session (which
	// costs a few milliseconds to set up).
	restoreByLeaderReads = 128
)

func (f *folder) snapshotInterval(en *entry) uint64 {
	if !f.catchingUp {
		return f.snapEach
	}
	return max(f.snapEach, min(maxSnapshotInterval, uint64(en.snapBytes/snapshotBytesPerEvent)))
}

// settle ends the catch-up spacing of snapshots: the open batch will hold
// the snapshot of every cached session SnapshotEvery or more behind.
func (f *folder) settle() {
	f.catchingUp = false
	for el := f.lru.Front(); el != nil; el = el.Next() {
		if en := el.Value.(*entry); en.st != nil && en.st.LastSeq-en.snapSeq >= f.snapEach {
			f.markDirty(en)
		}
	}
}

// indexAgents moves the session's keys in the indexes of the agents that
// may read it (store.AgentActivityPrefix, AgentStatusPrefix) from where
// they are stored (en.idxAgents at en.idxStatus and en.idxTime) to those
// of agents at the summary's status and time t; moved says that status
// or time changed (else only the agents added or gone are written).
func indexAgents(b *store.Batch, en *entry, agents []string, t uint64, moved bool) {
	tenant := api.TenantOf(en.id)
	keys := func(agent, status string, ns uint64) [2][]byte {
		return [2][]byte{
			store.IndexKey(store.AgentActivityPrefix(tenant, agent), ns, en.id),
			store.IndexKey(store.AgentStatusPrefix(tenant, agent, status), ns, en.id),
		}
	}
	for _, a := range en.idxAgents {
		if moved || !slices.Contains(agents, a) {
			for _, k := range keys(a, en.idxStatus, en.idxTime) {
				b.Delete(k, []byte{})
			}
		}
	}
	for _, a := range agents {
		if moved || !slices.Contains(en.idxAgents, a) {
			for _, k := range keys(a, en.sum.Status, t) {
				b.Set(k, nil, []byte{})
			}
		}
	}
	en.idxAgents = agents
}

// pending reports whether the open batch holds anything to commit.
func (f *folder) pending() bool { return f.batch != nil }

// flush writes the changed views, the due snapshots and the checkpoint in
// one batch, and hands it to Pebble on another goroutine (the batch
// before it landed first): the next batch folds meanwhile.
func (f *folder) flush() error {
	if f.batch == nil {
		return nil
	}
	b := f.batch
	for _, en := range f.dirty {
		f.lru.MoveToFront(en.elem)
		if en.st != nil {
			derive(&en.sum, en.st)
		}
		if en.chain != (logstore.ChainSum{}) && !en.chain.Spells(en.sum.LastHash) {
			en.sum.LastHash = en.chain.String()
		}
		v, err := store.AppendSummary(make([]byte, 0, len(en.stored)+len(en.stored)/8+64), &en.sum)
		if err != nil {
			return err
		}
		if !bytes.Equal(v, en.stored) {
			b.Set(store.SummaryKey(en.id), en.stored, v)
			en.stored = v
		}
		t := store.TimeKey(en.sum.LastActivity)
		moved := !en.indexed || en.idxStatus != en.sum.Status || en.idxTime != t
		if agents := readers(en.id, &en.sum); moved || !slices.Equal(agents, en.idxAgents) {
			indexAgents(b, en, agents, t, moved)
		}
		if moved {
			// The index of all sessions, and of the session's tenant's.
			tenant := api.TenantOf(en.id)
			if en.indexed {
				b.Delete(store.ActivityKey(en.idxTime, en.id), []byte{})
				b.Delete(store.StatusKey(en.idxStatus, en.idxTime, en.id), []byte{})
				if tenant != "" {
					b.Delete(store.IndexKey(store.TenantActivityPrefix(tenant), en.idxTime, en.id), []byte{})
					b.Delete(store.IndexKey(store.TenantStatusPrefix(tenant, en.idxStatus), en.idxTime, en.id), []byte{})
				}
			}
			b.Set(store.ActivityKey(t, en.id), nil, []byte{})
			b.Set(store.StatusKey(en.sum.Status, t, en.id), nil, []byte{})
			if tenant != "" {
				b.Set(store.IndexKey(store.TenantActivityPrefix(tenant), t, en.id), nil, []byte{})
				b.Set(store.IndexKey(store.TenantStatusPrefix(tenant, en.sum.Status), t, en.id), nil, []byte{})
			}
			en.idxStatus, en.idxTime, en.indexed = en.sum.Status, t, true
		}
		if en.st != nil && en.st.LastSeq-en.snapSeq >= f.snapshotInterval(en) {
			// MarshalJSON directly and the record by hand: json.Marshal
			// would re-scan the (large, growing) state twice more to
			// validate and compact bytes it has just produced.
			st, err := en.st.MarshalJSON()
			if err != nil {
				return err
			}
			sv := make([]byte, 0, len(st)+64)
			sv = append(sv, `{"lastSeq":`...)
			sv = strconv.AppendUint(sv, en.st.LastSeq, 10)
			sv = append(sv, `,"streamSeq":`...)
			sv = strconv.AppendUint(sv, en.sum.LastStreamSeq, 10)
			sv = append(sv, `,"state":`...)
			sv = append(sv, st...)
			if en.terms.len() > 0 {
				sv = append(sv, `,"termHashes":"`...)
				sv = appendTermHashes(sv, &en.terms)
				sv = append(sv, '"')
			}
			sv = append(sv, '}')
			b.SetInternal(store.SnapshotKey(en.id), sv)
			en.snapSeq, en.snapBytes = en.st.LastSeq, len(sv)
		}
		en.committed = en.sum.LastStreamSeq
		en.dirty = false
	}
	f.dirty = f.dirty[:0]
	f.lastBatch = b.Bytes()
	f.batch = nil
	if err := f.landed(); err != nil {
		b.Abandon()
		return err
	}
	p, err := b.CommitAsync(f.checkpoint())
	if err != nil {
		return err
	}
	f.inflight, f.inflightEvents = p, f.events
	f.events, f.bytes = 0, 0
	for f.lru.Len() > f.capacity {
		el := f.lru.Back()
		en := el.Value.(*entry)
		f.lru.Remove(el)
		delete(f.cache, en.id)
	}
	return nil
}
