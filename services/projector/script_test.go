package projector

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// scriptLog is what the scripts read of a log: what the fold reads
// (foldLog), and its streams to the end, which they deliver to the fold
// in stream order as the projector's consumers do.
type scriptLog interface {
	foldLog
	Streams() []string
	LastStreamSeq(ctx context.Context, stream string) (uint64, error)
}

var (
	_ scriptLog = (*memlog.Log)(nil)
	_ scriptLog = (*logstore.Store)(nil)
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
//	fold [until=N] [skip=(N,...)]
//	                      the messages of each stream after the fold's
//	                      position, up to its end (or stream seq N),
//	                      delivered in stream order to the fold, as the
//	                      consumers deliver them, then committed as one
//	                      batch; skip: stream seqs not delivered (what a
//	                      gap fill reads from the log)
//	restart [snapshot-every=N] [cache=N]
//	                      a new fold on the same store, resumed from its
//	                      checkpoint as a restarted projector is (checked
//	                      against the views), its cache empty; a store
//	                      without a checkpoint, or whose checkpoint does
//	                      not match its views, is wiped and folded from
//	                      the start, as a projector's start does
//	rebuild               the views compared with a rebuild to the same
//	                      positions from the start of the streams: on
//	                      logstore the projector's (Rebuild, its
//	                      consumers over NATS), on memlog a fold of every
//	                      message in one batch
//	folds                 what the fold did since its start: sessions
//	                      restored from their snapshot and the log, and
//	                      its reads of the log (sessions read, messages
//	                      read by stream seq)
//	summary [id=]         the session's summary
//	events [id=]          the session's folded events: the event index,
//	                      each read back from the log at its stream seq
//	context [id=]         the session's context entries
//	list [status=]        the sessions in the index (of one status)
func TestScripts(t *testing.T) {
	scripttest.Run(t, filepath.Join("testdata", "fold"), logstore.Config{}, "s", func(t *testing.T, b *scripttest.Backend) scripttest.Commands {
		db, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := &foldScript{b: b, log: b.Log.(scriptLog), db: db}
		s.counted.scriptLog = s.log
		s.f = s.newFolder(t, DefaultConfig().SnapshotEvery, DefaultConfig().CacheSessions, nil)
		return s.command
	})
}

type foldScript struct {
	b   *scripttest.Backend
	log scriptLog
	db  *store.DB
	f   *folder
	// counted is the log the fold reads, counting its reads.
	counted countedLog
}

// countedLog counts the fold's reads of the log.
type countedLog struct {
	scriptLog
	sessions, msgs int
}

func (l *countedLog) ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error) {
	l.sessions++
	return l.scriptLog.ReadSession(ctx, sessionID, afterStreamSeq, fn)
}

func (l *countedLog) MsgAt(ctx context.Context, stream string, seq uint64) (*logstore.Msg, error) {
	l.msgs++
	return l.scriptLog.MsgAt(ctx, stream, seq)
}

// newFolder is a fold on the script's store from the positions pos (a
// stream not among them: from its start).
func (s *foldScript) newFolder(t *testing.T, snapEach, cache int, pos []store.StreamPos) *folder {
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range s.log.Streams() {
		if !slices.ContainsFunc(pos, func(p store.StreamPos) bool { return p.Name == name }) {
			pos = append(pos, store.StreamPos{Name: name})
		}
	}
	s.counted.sessions, s.counted.msgs = 0, 0
	return newFolder(s.db, &s.counted, met, cache, snapEach, pos)
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
	case "rebuild":
		return s.rebuild(t)
	case "restart":
		snapEach, cache := DefaultConfig().SnapshotEvery, DefaultConfig().CacheSessions
		td.MaybeScanArgs(t, "snapshot-every", &snapEach)
		td.MaybeScanArgs(t, "cache", &cache)
		return s.restart(t, snapEach, cache)
	case "folds":
		var restores dto.Metric
		if err := s.f.met.restores.Write(&restores); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("restored %v sessions; read %d sessions and %d messages by stream seq of the log\n",
			restores.GetCounter().GetValue(), s.counted.sessions, s.counted.msgs)
	case "summary":
		return s.view(t, func(rd reader) string { return renderSummary(t, rd, id) })
	case "events":
		return s.view(t, func(rd reader) string { return s.events(t, rd, id) })
	case "context":
		return s.view(t, func(rd reader) string { return renderContext(t, rd, id) })
	case "list":
		var status string
		td.MaybeScanArgs(t, "status", &status)
		return s.view(t, func(rd reader) string {
			sums, _, _, err := rd.snap.List("", status, nil, 1000, nil)
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
		last, err := s.log.LastStreamSeq(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		last = upTo(name, last)
		delivered := 0
		for ss := s.f.pos[name].Seq + 1; ss <= last; ss++ {
			m, err := s.log.MsgAt(ctx, name, ss)
			if err != nil {
				t.Fatal(err)
			}
			if m == nil || skipped[ss] {
				continue
			}
			fm := msg{stream: name, streamSeq: m.StreamSeq, subject: m.Subject, header: m.Header, data: m.Data}
			if err := s.f.handle(ctx, &fm); err != nil {
				return out.String(), err
			}
			delivered++
		}
		fmt.Fprintf(&out, "delivered %d, at stream seq %d\n", delivered, s.f.pos[name].Seq)
	}
	if err := s.f.flush(); err != nil {
		return out.String(), err
	}
	return out.String(), s.f.landed()
}

// rebuild compares the views with a rebuild of them from the start of
// the streams to the same positions: on logstore the projector's own
// (Rebuild: its consumers over NATS), on memlog a fold of every message
// in one batch. Their checksums (every view, none of the snapshots) must
// agree, and agree with a scan of the views.
func (s *foldScript) rebuild(t *testing.T) string {
	ctx := context.Background()
	if err := s.f.landed(); err != nil {
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
	if s.b.Store != nil {
		if rebuilt, err = Rebuild(ctx, s.b.Store, dir, cp, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	} else {
		db, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		r := &foldScript{b: s.b, log: s.log, db: db}
		r.counted.scriptLog = s.log
		r.f = r.newFolder(t, DefaultConfig().SnapshotEvery, DefaultConfig().CacheSessions, nil)
		if _, err := r.fold(t, func(name string, last uint64) uint64 { return min(last, cp.Stream(name).Seq) }, nil); err != nil {
			t.Fatal(err)
		}
		rebuilt = db.Checksum()
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
	ctx := context.Background()
	if err := s.f.landed(); err != nil {
		t.Fatal(err)
	}
	infos := map[string]streamInfo{}
	for _, name := range s.log.Streams() {
		last, err := s.log.LastStreamSeq(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		infos[name] = streamInfo{last: last}
	}
	mode, err := checkStore(s.db, infos)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if mode.Rebuild {
		if err := s.db.Wipe(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "rebuild: %s\n", mode.Reason)
		mode.From.Streams = nil
	}
	s.f = s.newFolder(t, snapEach, cache, mode.From.Streams)
	for _, p := range mode.From.Streams {
		fmt.Fprintf(&out, "resumed after stream seq %d\n", p.Seq)
	}
	return out.String()
}

// view runs fn on a snapshot of the store, as the HTTP API reads it.
func (s *foldScript) view(t *testing.T, fn func(rd reader) string) string {
	if err := s.f.landed(); err != nil {
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
