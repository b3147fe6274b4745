package logstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// countingFolder is a log, counting the events ReadJudged gives.
type countingFolder struct {
	logstore.SessionFolder
	read int
}

func (c *countingFolder) ReadJudged(ctx context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error) {
	return c.SessionFolder.ReadJudged(ctx, j, func(m *logstore.Msg, ev *schema.Envelope) error {
		c.read++
		return fn(m, ev)
	})
}

// eachFolder runs fn on each backend of the rule scripts (memlog, and
// logstore over an embedded NATS server) with its log.
func eachFolder(t *testing.T, fn func(t *testing.T, b *scripttest.Backend, l logstore.SessionFolder)) {
	for _, name := range scripttest.Names {
		t.Run(name, func(t *testing.T) {
			b := scripttest.Open(t, name, logstore.Config{LeaseTTL: time.Minute})
			var l logstore.SessionFolder = b.Store
			if b.Mem != nil {
				l = b.Mem
			}
			fn(t, b, l)
		})
	}
}

// TestFoldSession: FoldSession folds a session from its snapshot when it
// matches the log, reading only the events after it, and folds those;
// a snapshot that does not match is ignored (with why) and the session
// folded from its start; without a snapshot, or with NoSnapshot, from its
// start. On memlog and on logstore over an embedded NATS server.
func TestFoldSession(t *testing.T) {
	ctx := context.Background()
	eachFolder(t, func(t *testing.T, b *scripttest.Backend, l logstore.SessionFolder) {
		for _, id := range []string{"good", "bad", "none"} {
			b.Append(t, id, "session/created\nmessage/user\nmessage/user\nmessage/user\nmessage/user")
			if id != "none" {
				b.Snapshot(t, id, 4, id == "bad")
			}
			// After the snapshot: a turn left open.
			b.Append(t, id, "turn/started turn=t1\nmessage/user turn=t1")
		}
		fold := func(id string, o logstore.FoldOptions) (logstore.Folded, int) {
			t.Helper()
			c := &countingFolder{SessionFolder: l}
			f, err := logstore.FoldSession(ctx, c, id, o)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if f.State.LastSeq != 7 || f.Tail.Seq != 7 || f.Events != c.read || !f.State.HasOpenWork() {
				t.Fatalf("%s: folded to seq %d (tail %d, %d events of %d read, open work %v): want the whole session, seq 7, turn t1 open",
					id, f.State.LastSeq, f.Tail.Seq, f.Events, c.read, f.State.OpenWork())
			}
			return f, c.read
		}

		f, read := fold("good", logstore.FoldOptions{})
		if f.Snapshot.Use != logstore.SnapshotUsed || f.Snapshot.Base == nil || f.Start.Seq != 4 || f.Start.StreamSeq == 0 || read != 3 {
			t.Fatalf("good: snapshot %v, start %+v, %d events read: want it used, from seq 4, the 3 after it", f.Snapshot.Use, f.Start, read)
		}

		f, read = fold("bad", logstore.FoldOptions{})
		if f.Snapshot.Use != logstore.SnapshotIgnored || !errors.Is(f.Snapshot.Why, logstore.ErrSnapshotMismatch) || f.Snapshot.Base != nil || f.Start != (logstore.Tail{}) || read != 7 {
			t.Fatalf("bad: snapshot %v (%v), start %+v, %d events read: want it ignored as a mismatch, the 7 from the start", f.Snapshot.Use, f.Snapshot.Why, f.Start, read)
		}

		for id, o := range map[string]logstore.FoldOptions{"none": {}, "good": {NoSnapshot: true}} {
			f, read = fold(id, o)
			if f.Snapshot.Use != logstore.SnapshotNone || f.Start != (logstore.Tail{}) || read != 7 {
				t.Fatalf("%s %+v: snapshot %v, start %+v, %d events read: want none, the 7 from the start", id, o, f.Snapshot.Use, f.Start, read)
			}
		}

		// From a state folded before (a cache's, shared): the events
		// after it fold into a clone; none after it, the state itself.
		f, _ = fold("none", logstore.FoldOptions{})
		from := &logstore.FoldStart{State: f.State, Last: f.Tail, Shared: true}
		b.Append(t, "none", "message/user turn=t1")
		c := &countingFolder{SessionFolder: l}
		g, err := logstore.FoldSession(ctx, c, "none", logstore.FoldOptions{From: from})
		if err != nil || c.read != 1 || g.State == from.State || g.State.LastSeq != 8 || from.State.LastSeq != 7 || g.Start != from.Last || g.Snapshot.Use != logstore.SnapshotNone {
			t.Fatalf("from a shared state: %v, %d read, last seq %d (the shared one's %d), start %+v: want 1 read into a clone at seq 8, the shared one left at 7",
				err, c.read, g.State.LastSeq, from.State.LastSeq, g.Start)
		}
		from = &logstore.FoldStart{State: g.State, Last: g.Tail, Shared: true}
		if g, err = logstore.FoldSession(ctx, l, "none", logstore.FoldOptions{From: from}); err != nil || g.State != from.State || g.Events != 0 {
			t.Fatalf("from a shared state with nothing after it: %v, %d events, same state %v", err, g.Events, g.State == from.State)
		}
	})
}

// TestFoldSessionThroughLastStopped: Through ends the fold at a stream
// seq (a snapshot taken after it not read on from), Last is the last
// event folded as the judge left it, and Stopped says the fold ended at a
// message that does not fold or is unreadable, not at the tail or at
// Through. On memlog and on logstore over an embedded NATS server.
func TestFoldSessionThroughLastStopped(t *testing.T) {
	ctx := context.Background()
	eachFolder(t, func(t *testing.T, b *scripttest.Backend, l logstore.SessionFolder) {
		b.Append(t, "s", "session/created\nmessage/user\nmessage/user\nmessage/user\nmessage/user")
		b.Snapshot(t, "s", 4, false)
		b.Append(t, "s", "message/user\nmessage/user")
		var lasts []logstore.Tail // lasts[i]: the judge after seq i+1
		j := logstore.Judge{SessionID: "s"}
		if _, err := l.ReadJudged(ctx, &j, func(*logstore.Msg, *schema.Envelope) error {
			lasts = append(lasts, j.Last)
			return nil
		}); err != nil || len(lasts) != 7 {
			t.Fatalf("read: %d events, %v", len(lasts), err)
		}
		for _, tc := range []struct {
			through  uint64
			want     int // the last seq folded
			snapshot logstore.SnapshotUse
		}{{0, 7, logstore.SnapshotUsed}, {lasts[2].StreamSeq, 3, logstore.SnapshotNone}, {lasts[4].StreamSeq, 5, logstore.SnapshotUsed}} {
			f, err := logstore.FoldSession(ctx, l, "s", logstore.FoldOptions{Through: tc.through})
			if err != nil || f.Stopped || f.State.LastSeq != uint64(tc.want) || f.Last != lasts[tc.want-1] || f.Snapshot.Use != tc.snapshot {
				t.Fatalf("through %d: %v, stopped %v, seq %d, last %+v, snapshot %v: want seq %d, last %+v, snapshot %v",
					tc.through, err, f.Stopped, f.State.LastSeq, f.Last, f.Snapshot.Use, tc.want, lasts[tc.want-1], tc.snapshot)
			}
		}

		// turn/ended with no turn open does not fold; a message stored
		// around the writer with a wrong SL-Seq is unreadable.
		b.Append(t, "u", "session/created\nmessage/user\nturn/ended turn=t9 reason=completed\nmessage/user")
		b.Append(t, "r", "session/created\nmessage/user")
		b.PutAround(t, "r", scripttest.Around(t, "r", "message/user seq=3"), 9)
		for id, wantErr := range map[string]bool{"u": false, "r": true} {
			f, err := logstore.FoldSession(ctx, l, id, logstore.FoldOptions{UpToUnfoldable: true})
			if (err != nil) != wantErr || !f.Stopped || f.State.LastSeq != 2 || f.Last.Seq != 2 || f.Last.EventID != "e2" {
				t.Fatalf("%s: %v, stopped %v, seq %d, last %+v: want stopped after seq 2", id, err, f.Stopped, f.State.LastSeq, f.Last)
			}
		}
	})
}
