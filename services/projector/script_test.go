package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// The scripts run the projector on either log as its Log.
var (
	_ Followed[*memlog.Follower]   = (*memlog.Log)(nil)
	_ Followed[*logstore.Follower] = (*logstore.Store)(nil)
)

// TestScripts runs the scripts in testdata/fold on the in-memory log and
// on logstore over an embedded NATS server (scripttest.Run): the same
// output on both. The fold writes into real Pebble in a temp dir, and
// the views are read from it as the HTTP API reads them. Commands (id=
// names the session, default s):
//
//	append [id=]          the input's events (sessiontest's short form)
//	                      after the session's tail, in one batch
//	repeat [id=] n=N      the input's events N times over, in one batch
//	around [id=] [seq=N] [garbage]
//	                      a message stored around the writer (see
//	                      scripttest.Run)
//	copy [id=] stream=N   the message at stream seq N stored again around
//	                      the writer, body and seq as they are
//	show [id=]            the session as the log judges it
//	bad-subject [id=] token=T
//	                      the input's one event stored on the subject of
//	                      the session's stream whose last token is T (a
//	                      subject of no session when T is no session id)
//	consume [until=N]     the projector's consume loop (its consumers,
//	                      fold loop and erasure watch) run until the fold
//	                      has reached the last message each stream holds
//	                      (or stream seq N), folding nothing past it
//	fold [until=N] [skip=(N,...)]
//	                      the messages of each stream after the fold's
//	                      position, up to its end (or stream seq N),
//	                      delivered in stream order to the fold, as the
//	                      consumers deliver them, then committed as one
//	                      batch as the fold loop commits one (the batch
//	                      that reaches the catch-up's target settles the
//	                      snapshots); skip: stream seqs not delivered
//	                      (what a gap fill reads from the log)
//	restart [snapshot-every=N] [cache=N]
//	                      a new projector on the same store, started as
//	                      New starts it (Service.start, without the HTTP
//	                      side): resumed from its checkpoint (checked
//	                      against the views and the streams), its cache
//	                      empty, catching up to the last message each
//	                      stream holds now; a store without a checkpoint,
//	                      or whose checkpoint does not match its views or
//	                      its streams, is wiped and folded from the start;
//	                      the rollback checks of a start run
//	erase [id=]           the session erased (its erasure record, then
//	                      its events deleted; a record written before by
//	                      mark-erased is updated, done); the projector's
//	                      erasure watch names it and its views are
//	                      removed as the fold loop removes them
//	mark-erased [id=]     the session's erasure record alone (an erase's
//	                      first step: its events are still stored), and
//	                      its views removed as for erase; the fold skips
//	                      its events from now on
//	rebuild               the views compared with the projector's
//	                      rebuild to the same positions from the start
//	                      of the streams (Rebuild, its consumers over
//	                      NATS or on memlog)
//	observed              the events the projector's observer was given
//	                      (Config.Observer: those folded once caught up)
//	                      since the last observed
//	folds                 what the fold did since its start: sessions
//	                      restored from their snapshot and the log, and
//	                      its reads of the log (sessions read, messages
//	                      read by stream seq)
//	skipped               the messages the fold skipped since its start,
//	                      by reason
//	snapshots             each session's stored fold snapshot, and
//	                      whether the fold has caught up
//	lower                 what the fold loop runs when its recheck timer
//	                      fires while it catches up with nothing to fold
//	                      (catchUp.lower): each stream's target lowered
//	                      to the last message it holds now; then the
//	                      targets, and whether the fold has caught up
//	summary [id=]         the session's summary
//	events [id=]          the session's folded events: the event index,
//	                      each read back from the log at its stream seq
//	context [id=]         the session's context entries
//	list [tenant=] [agents=(A,...)] [status=]
//	                      the sessions in the index (of one status; of
//	                      one tenant's; in the indexes of its agents)
//	terms [id=]           the session's search index: each term, and the
//	                      seq of the first event that holds it
//	search terms=(T,...) [within=P]
//	                      the sessions the search index says hold every
//	                      term (of ids beginning with P), and the seq of
//	                      the first event holding the first term
func TestScripts(t *testing.T) {
	runFoldScripts(t, scripttest.Names, filepath.Join("testdata", "fold"))
}

// TestRollbackScripts runs the scripts in testdata/rollback on the
// in-memory log alone, which can lose what it stored as a log restored
// from an older copy does: the commands of testdata/fold, and
//
//	roll-back [id=] to=N  the stream of the session ends at stream seq N
//	                      (memlog's RollBack): what it held after is gone
//	                      and the next message stored takes seq N+1
//	check-streams         the running projector's check of the streams
//	                      (Service.CheckStreams), then rolled-back
//	rolled-back           whether the projector raised log_rolled_back
//	                      (its reason and the metric): by its start
//	                      (restart) or its checks
func TestRollbackScripts(t *testing.T) {
	runFoldScripts(t, []string{"memlog"}, filepath.Join("testdata", "rollback"))
}

// runFoldScripts runs the projector's scripts in dir on the named
// backends.
func runFoldScripts(t *testing.T, backends []string, dir string) {
	scripttest.RunOn(t, backends, dir, logstore.Config{}, "s", func(t *testing.T, b *scripttest.Backend) scripttest.Commands {
		db, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := &foldScript{b: b, log: b.Log.(Log), db: db, er: newErasures()}
		s.counted.Log = s.log
		if b.Mem != nil {
			s.cl = followsOf(b.Mem)
		} else {
			s.cl = followsOf(b.Store)
		}
		// The erasure watch of the projector, for the whole script: a
		// restart keeps the ids it learnt (a restarted projector's watch
		// delivers them again at its start).
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.er.follow(ctx, s.log, slog.New(slog.DiscardHandler))
		}()
		t.Cleanup(func() { cancel(); <-done })
		s.start(t, DefaultConfig().SnapshotEvery, DefaultConfig().CacheSessions)
		return s.command
	})
}

type foldScript struct {
	b *scripttest.Backend
	// log is what the scripts read of the log, as the projector reads it
	// (Log): its streams, which the scripts read to their ends and
	// deliver to the fold in stream order as the projector's consumers
	// do, what the fold reads, the catch-up's target, and the erased ids.
	log Log
	db  *store.DB
	// svc is the projector as far as the scripts run it: its fold, its
	// catch-up, its erasures (er, the watch's) and their removal.
	svc *Service
	er  *erasures
	// cl is the log as the consume loop reads it.
	cl followLog
	// counted is the log the fold reads, counting its reads.
	counted countedLog
	// obs is the projector's observer (Config.Observer), for the whole
	// script.
	obs scriptObserver
}

// scriptObserver keeps what the projector's observer is given.
type scriptObserver struct {
	mu   sync.Mutex
	seen []string
}

func (o *scriptObserver) Observe(ev *schema.Envelope, streamSeq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, fmt.Sprintf("stream %d %s %d %s\n", streamSeq, ev.SessionID, ev.Seq, ev.Type))
}

func (o *scriptObserver) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// observed is what the observer was given since the last call.
func (o *scriptObserver) observed() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := strings.Join(o.seen, "")
	o.seen = nil
	if out == "" {
		return "none\n"
	}
	return out
}

// erasureRecords are the erasure records as an eraser finishes one.
type erasureRecords interface {
	ErasureOf(ctx context.Context, sessionID string) (*logstore.Erasure, uint64, error)
	UpdateErasure(ctx context.Context, e logstore.Erasure, rev uint64) (uint64, error)
}

// countedLog counts the fold's reads of the log.
type countedLog struct {
	Log
	sessions, msgs int
}

func (l *countedLog) ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error) {
	l.sessions++
	return l.Log.ReadSession(ctx, sessionID, afterStreamSeq, fn)
}

func (l *countedLog) MsgAt(ctx context.Context, stream string, seq uint64) (*logstore.Msg, error) {
	l.msgs++
	return l.Log.MsgAt(ctx, stream, seq)
}

// start makes the script's projector as New makes it, without its HTTP
// side, on the script's log and store, and starts it (Service.start: the
// stored checkpoint checked against the streams and the views rebuilt or
// resumed, the rollback checks, the catch-up's target); its erasures are
// the watch's, and the fold's reads of the log are counted. It returns
// how the projector started.
func (s *foldScript) start(t *testing.T, snapEach, cache int) StartMode {
	svc, err := newService(Config{SnapshotEvery: snapEach, CacheSessions: cache, Observer: &s.obs}.withDefaults(), s.cl, s.db)
	if err != nil {
		t.Fatal(err)
	}
	svc.er = s.er
	if err := svc.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.counted.sessions, s.counted.msgs = 0, 0
	svc.f.ls = &s.counted
	s.svc = svc
	return svc.mode
}

func (s *foldScript) command(t *testing.T, td *datadriven.TestData, id string) string {
	ctx := context.Background()
	switch td.Cmd {
	case "repeat":
		var n int
		td.ScanArgs(t, "n", &n)
		return s.b.Append(t, id, strings.Repeat(td.Input+"\n", n))
	case "copy":
		var ss uint64
		td.ScanArgs(t, "stream", &ss)
		loc, err := s.log.Locate(id)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.log.MsgAt(ctx, loc.Stream, ss)
		if err != nil || m == nil {
			t.Fatalf("no message at stream seq %d (%v)", ss, err)
		}
		ev, err := schema.Decode(m.Data)
		seq := ev.Seq
		if err != nil || seq == 0 {
			t.Fatalf("the message at stream seq %d has no seq (%v)", ss, err)
		}
		s.b.PutAround(t, id, m.Data, seq)
		return "ok\n"
	case "bad-subject":
		var token string
		td.ScanArgs(t, "token", &token)
		h := nats.Header{}
		h.Set(logstore.HeaderMsgID, token+":1")
		s.b.PutSubject(t, id, token, h, scripttest.Around(t, id, td.Input))
		return "ok\n"
	case "erase":
		recs := s.b.Log.(erasureRecords)
		e, rev, err := recs.ErasureOf(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s.b.Erase(t, id)
		if e != nil {
			// An erase begun (mark-erased) finishes as the eraser
			// finishes it: its record updated, which the watch names
			// again.
			e.Done, e.Phase = true, logstore.ErasePhaseDone
			if _, err := recs.UpdateErasure(ctx, *e, rev); err != nil {
				t.Fatal(err)
			}
		}
		return s.erased(t, id)
	case "mark-erased":
		if _, _, err := s.b.Log.MarkErased(ctx, logstore.Erasure{SessionID: id, By: "script", Reason: "test", Phase: logstore.ErasePhaseDeleting}); err != nil {
			t.Fatal(err)
		}
		return s.erased(t, id)
	case "fold":
		var until uint64
		td.MaybeScanArgs(t, "until", &until)
		var skip []int
		td.MaybeScanArgs(t, "skip", &skip)
		out, err := s.fold(t, func(_ string, last uint64) uint64 {
			if until != 0 {
				return min(last, until)
			}
			return last
		}, skip)
		if err != nil {
			return out + scripttest.Error(err)
		}
		return out
	case "consume":
		var until uint64
		td.MaybeScanArgs(t, "until", &until)
		return s.consume(t, until)
	case "rebuild":
		return s.rebuild(t)
	case "restart":
		snapEach, cache := DefaultConfig().SnapshotEvery, DefaultConfig().CacheSessions
		td.MaybeScanArgs(t, "snapshot-every", &snapEach)
		td.MaybeScanArgs(t, "cache", &cache)
		return s.restart(t, snapEach, cache)
	case "folds":
		var restores dto.Metric
		if err := s.svc.f.met.restores.Write(&restores); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("restored %v sessions; read %d sessions and %d messages by stream seq of the log\n",
			restores.GetCounter().GetValue(), s.counted.sessions, s.counted.msgs)
	case "skipped":
		var out strings.Builder
		for _, reason := range []string{"bad_subject", "duplicate", "erased", "stopped"} {
			var m dto.Metric
			if err := s.svc.met.skipped.WithLabelValues(reason).Write(&m); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %v\n", reason, m.GetCounter().GetValue())
		}
		return out.String()
	case "snapshots":
		return s.view(t, func(rd reader) string { return s.snapshots(t, rd) })
	case "lower":
		if err := s.svc.f.landed(); err != nil {
			t.Fatal(err)
		}
		s.svc.cu.lower(ctx, s.log, s.svc.f, s.svc.log)
		var out strings.Builder
		for _, name := range s.log.Streams() {
			fmt.Fprintf(&out, "target stream seq %d\n", s.svc.cu.target[name])
		}
		if s.svc.cu.done.Load() {
			out.WriteString("caught up\n")
		} else {
			out.WriteString("catching up\n")
		}
		return out.String()
	case "roll-back":
		var to uint64
		td.ScanArgs(t, "to", &to)
		if s.b.Mem == nil {
			t.Fatalf("roll-back: only memlog rolls back")
		}
		loc, err := s.log.Locate(id)
		if err != nil {
			t.Fatal(err)
		}
		s.b.Mem.RollBack(loc.Stream, to)
		return "ok\n"
	case "check-streams":
		s.svc.CheckStreams(ctx)
		return s.rolledBack(t)
	case "rolled-back":
		return s.rolledBack(t)
	case "observed":
		return s.obs.observed()
	case "terms":
		return s.view(t, func(rd reader) string { return renderTerms(t, rd, id) })
	case "search":
		var terms []string
		td.ScanArgs(t, "terms", &terms)
		var within string
		td.MaybeScanArgs(t, "within", &within)
		return s.view(t, func(rd reader) string { return renderSearch(t, rd, terms, within) })
	case "summary":
		return s.view(t, func(rd reader) string { return renderSummary(t, rd, id) })
	case "events":
		return s.view(t, func(rd reader) string { return s.events(t, rd, id) })
	case "context":
		return s.view(t, func(rd reader) string { return renderContext(t, rd, id) })
	case "list":
		var status, tenant string
		var agents []string
		td.MaybeScanArgs(t, "status", &status)
		td.MaybeScanArgs(t, "tenant", &tenant)
		td.MaybeScanArgs(t, "agents", &agents)
		return s.view(t, func(rd reader) string {
			sums, _, _, err := rd.snap.List(tenant, status, nil, 1000, nil)
			if agents != nil {
				sums, _, _, err = rd.snap.AgentsList(tenant, agents, status, nil, 1000, func(string, *store.Summary) bool { return true })
			}
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for _, sum := range sums {
				fmt.Fprintf(&out, "%s %s lastSeq %d\n", sum.SessionID, sum.Status, sum.LastSeq)
			}
			if len(sums) == 0 {
				out.WriteString("none\n")
			}
			return out.String()
		})
	}
	t.Fatalf("unknown command %s", td.Cmd)
	return ""
}

// fold delivers each stream's messages after the fold's position up to
// upTo's bound of its last (stream order, but those skip names), and
// commits them as one batch. Its errors are the fold's (the store's, or
// the log's).
func (s *foldScript) fold(t *testing.T, upTo func(stream string, last uint64) uint64, skip []int) (string, error) {
	ctx := context.Background()
	skipped := map[uint64]bool{}
	for _, n := range skip {
		skipped[uint64(n)] = true
	}
	var out strings.Builder
	for _, name := range s.log.Streams() {
		st, err := s.log.StreamStatus(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		last := upTo(name, st.LastSeq)
		delivered := 0
		for ss := s.svc.f.pos[name].Seq + 1; ss <= last; ss++ {
			m, err := s.log.MsgAt(ctx, name, ss)
			if err != nil {
				t.Fatal(err)
			}
			if m == nil || skipped[ss] {
				continue
			}
			fm := msg{stream: name, streamSeq: m.StreamSeq, subject: m.Subject, header: m.Header, data: m.Data}
			if err := s.svc.f.handle(ctx, &fm); err != nil {
				return out.String(), err
			}
			delivered++
		}
		fmt.Fprintf(&out, "delivered %d, at stream seq %d\n", delivered, s.svc.f.pos[name].Seq)
	}
	return out.String(), s.svc.commit()
}

// rebuild compares the views with the projector's rebuild of them from
// the start of the streams to the same positions (Rebuild: its consumers,
// fold loop and erasure watch, over NATS or on memlog). Their checksums (every view, none of the snapshots) must
// agree, and agree with a scan of the views.
func (s *foldScript) rebuild(t *testing.T) string {
	ctx := context.Background()
	if err := s.svc.f.landed(); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := s.db.Checkpoint()
	if err != nil || !ok {
		t.Fatalf("no checkpoint (%v)", err)
	}
	scanned, _, err := s.db.Scan()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rebuilt uint64
	if s.b.Mem != nil {
		rebuilt, err = Rebuild(ctx, s.b.Mem, dir, cp, slog.New(slog.DiscardHandler))
	} else {
		rebuilt, err = Rebuild(ctx, s.b.Store, dir, cp, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		t.Fatal(err)
	}
	if stored := s.db.Checksum(); stored != scanned || scanned != rebuilt {
		return fmt.Sprintf("the views differ: checksum %016x, scanned %016x, rebuilt %016x\n", stored, scanned, rebuilt)
	}
	return "the views are a rebuild's\n"
}

// restart replaces the fold with one resumed from the store's checkpoint,
// as a projector's start does once the checkpoint is checked against the
// views (checkStore).
func (s *foldScript) restart(t *testing.T, snapEach, cache int) string {
	if err := s.svc.f.landed(); err != nil {
		t.Fatal(err)
	}
	mode := s.start(t, snapEach, cache)
	var out strings.Builder
	if mode.Rebuild {
		fmt.Fprintf(&out, "rebuild: %s\n", mode.Reason)
	}
	for _, p := range mode.From.Streams {
		fmt.Fprintf(&out, "resumed after stream seq %d\n", p.Seq)
	}
	return out.String()
}

// rolledBack says whether the projector raised log_rolled_back: its
// reason and the metric.
func (s *foldScript) rolledBack(t *testing.T) string {
	var m dto.Metric
	if err := s.svc.rb.gauge.Write(&m); err != nil {
		t.Fatal(err)
	}
	r := s.svc.rb.reason()
	if r == "" {
		r = "not rolled back"
	}
	return fmt.Sprintf("%s\nsessionlog_projector_log_rolled_back %v\n", r, m.GetGauge().GetValue())
}

// view runs fn on a snapshot of the store, as the HTTP API reads it.
func (s *foldScript) view(t *testing.T, fn func(rd reader) string) string {
	if err := s.svc.f.landed(); err != nil {
		t.Fatal(err)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	return fn(reader{snap: snap})
}

func renderSummary(t *testing.T, rd reader, id string) string {
	sum, err := rd.summary(id)
	if err != nil {
		t.Fatal(err)
	}
	if sum == nil {
		return "no session\n"
	}
	var out strings.Builder
	fmt.Fprintf(&out, "status %s, lastSeq %d (stream seq %d, %s %s), turns %d\n", sum.Status, sum.LastSeq, sum.LastStreamSeq, sum.LastType, sum.LastEventID, sum.Turns)
	if tv := sum.OpenTurn; tv != nil {
		fmt.Fprintf(&out, "open turn %s from seq %d\n", tv.ID, tv.StartSeq)
	}
	if tv := sum.LastTurn; tv != nil {
		fmt.Fprintf(&out, "last turn %s seqs %d-%d %s\n", tv.ID, tv.StartSeq, tv.EndSeq, tv.Reason)
	}
	for _, tool := range sum.OpenTools {
		fmt.Fprintf(&out, "open tool %s %s %s from seq %d\n", tool.ID, tool.Name, tool.Phase, tool.StartSeq)
	}
	for _, a := range sum.PendingApprovals {
		fmt.Fprintf(&out, "pending approval %s from seq %d\n", a.ID, a.StartSeq)
	}
	if c := sum.Compaction; c != nil {
		fmt.Fprintf(&out, "compaction %s through seq %d, ended at seq %d\n", c.ID, c.ThroughSeq, c.EndSeq)
	}
	if sum.Rewinds > 0 {
		fmt.Fprintf(&out, "rewinds %d\n", sum.Rewinds)
	}
	if p := sum.Problem; p != nil {
		fmt.Fprintf(&out, "problem %s at seq %d, stream seq %d", p.Code, p.Seq, p.StreamSeq)
		if p.GotSeq != 0 {
			fmt.Fprintf(&out, ", got seq %d", p.GotSeq)
		}
		fmt.Fprintf(&out, ": %s\n", p.Message)
	}
	return out.String()
}

// events reads the session's event index, and each event it names from
// the log at its stream seq (as /events serves a stopped session).
func (s *foldScript) events(t *testing.T, rd reader, id string) string {
	loc, err := s.log.Locate(id)
	if err != nil {
		t.Fatal(err)
	}
	it, err := rd.iter(store.EventPrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		seq := store.EventSeq(it.Key())
		ss, _ := store.DecodeEventValue(it.Value())
		m, err := s.log.MsgAt(context.Background(), loc.Stream, ss)
		if err != nil || m == nil {
			fmt.Fprintf(&out, "seq %d: stream seq %d is gone (%v)\n", seq, ss, err)
			continue
		}
		ev, err := schema.Decode(m.Data)
		if err != nil {
			t.Fatalf("seq %d at stream seq %d: %v", seq, ss, err)
		}
		if ev.Seq != seq {
			t.Fatalf("the index holds seq %d at stream seq %d, whose event has seq %d", seq, ss, ev.Seq)
		}
		fmt.Fprintf(&out, "stream %d: %s", ss, scripttest.Event(&ev))
	}
	if out.Len() == 0 {
		return "none\n"
	}
	return out.String()
}

// renderContext is the session's context as /context serves it: nothing of
// an unreadable session, the last compaction's summary, then the entries
// after it that no rewind abandoned.
func renderContext(t *testing.T, rd reader, id string) string {
	c, unreadable, err := httpapi.ContextOf(rd.snap, id, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case unreadable:
		return "unreadable: not served\n"
	case c == nil:
		return "no session\n"
	}
	var out strings.Builder
	if c := c.Compaction; c != nil {
		fmt.Fprintf(&out, "compacted through seq %d: %s\n", c.ThroughSeq, c.Summary)
	}
	for _, e := range c.Entries {
		fmt.Fprintf(&out, "%d %s %s", e.Seq, e.Role, e.Type)
		for _, f := range [][2]string{{"turn", e.TurnID}, {"attempt", e.AttemptID}, {"call", e.ToolCallID}} {
			if f[1] != "" {
				fmt.Fprintf(&out, " %s=%s", f[0], f[1])
			}
		}
		if e.Synthetic {
			out.WriteString(" synthetic")
		}
		fmt.Fprintf(&out, " %s\n", e.Data)
	}
	if out.Len() == 0 {
		return "empty\n"
	}
	return out.String()
}

// consume runs the projector's consume loop (its consumers following
// each stream from the fold's position, its fold loop, its erasure
// watch) until the fold has reached the last message each stream holds
// (or stream seq until), and folds nothing past the stream's end (or
// until), as a rebuild to a position runs it (Rebuild).
func (s *foldScript) consume(t *testing.T, until uint64) string {
	ctx := context.Background()
	bounds, behind := map[string]bound{}, false
	for _, name := range s.log.Streams() {
		st, err := s.log.StreamStatus(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held, err := s.log.LastHeldSeq(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b := bound{last: st.LastSeq, enough: held}
		if until != 0 {
			b = bound{last: until, enough: min(until, held)}
		}
		bounds[name] = b
		if p := s.svc.f.pos[name]; p == nil || p.Seq < b.enough {
			behind = true
		}
	}
	if behind {
		// A loop that never reaches the position fails the script, not
		// the test binary's timeout.
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := s.svc.consume(cctx, bounds); err != nil {
			return scripttest.Error(err)
		}
		if cctx.Err() != nil {
			t.Fatalf("the consume loop did not reach %v in a minute", bounds)
		}
	}
	var out strings.Builder
	for _, name := range s.log.Streams() {
		fmt.Fprintf(&out, "at stream seq %d\n", s.svc.f.pos[name].Seq)
	}
	return out.String()
}

// erased waits for the projector's erasure watch to name session id and
// removes its views as the fold loop does (Service.erased).
func (s *foldScript) erased(t *testing.T, id string) string {
	// Ids named before are passed over: the consume loop's own watch
	// names every erased id again when it starts.
	for named := ""; named != id; {
		select {
		case named = <-s.er.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("the erasure watch did not name %s", id)
		}
	}
	if err := s.svc.erased(id); err != nil {
		return scripttest.Error(err)
	}
	return "views erased\n"
}

// snapshots lists each session's stored fold snapshot (its seq and the
// summary's) in id order, then whether the fold caught up.
func (s *foldScript) snapshots(t *testing.T, rd reader) string {
	sums, _, _, err := rd.snap.List("", "", nil, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(sums, func(a, b store.Summary) int { return strings.Compare(a.SessionID, b.SessionID) })
	var out strings.Builder
	for _, sum := range sums {
		v, ok, err := rd.snap.Get(store.SnapshotKey(sum.SessionID))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			fmt.Fprintf(&out, "%s lastSeq %d: no snapshot\n", sum.SessionID, sum.LastSeq)
			continue
		}
		var sn snapshot
		if err := json.Unmarshal(v, &sn); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s lastSeq %d: snapshot at seq %d\n", sum.SessionID, sum.LastSeq, sn.LastSeq)
	}
	if s.svc.cu.done.Load() {
		out.WriteString("caught up\n")
	} else {
		out.WriteString("catching up\n")
	}
	return out.String()
}

// renderTerms is the session's search index: each term, and the seq of
// its first event holding it, in key order.
func renderTerms(t *testing.T, rd reader, id string) string {
	it, err := rd.iter(store.SearchPrefix())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if store.SearchKeySession(k) != id {
			continue
		}
		term, _, _ := bytes.Cut(k[len(store.SearchPrefix()):], []byte{0})
		_, seq, ok := store.SearchEntry(store.SearchTermPrefix(string(term)), k)
		if !ok {
			t.Fatalf("search key %q", k)
		}
		fmt.Fprintf(&out, "%s %d\n", term, seq)
	}
	if out.Len() == 0 {
		return "none\n"
	}
	return out.String()
}

// renderSearch is what the search index answers a search of terms within
// the ids beginning with within.
func renderSearch(t *testing.T, rd reader, terms []string, within string) string {
	var out strings.Builder
	err := rd.snap.Search(terms, within, "", "", func(ss store.SearchSession) bool {
		if ss.HoldsAll() {
			fmt.Fprintf(&out, "%s %d\n", ss.ID, ss.Seq)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Len() == 0 {
		return "none\n"
	}
	return out.String()
}
