package projector_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// What nats-server v2.15.3 says it lost of a stream (the "lost" of its
// detailed state) after its block file was damaged while it was down,
// with its index.db (the stream state it writes when it stops) kept or
// gone (a server killed before it wrote one that matches). The six
// messages are seqs 1..6 of one block. The server names lost sequences
// only for a block index.db names and the disk no longer has; a damaged
// record it rebuilds a block past (a cut inside a record, a flipped bit
// with no index.db to trust) is only bytes; a block cut at a record's
// boundary (what a power loss leaves: unsynced writes are whole records),
// a flipped bit index.db hides, or a block lost with its index.db are not
// reported at all. It forgets what it lost when it restarts.
func TestServerLostData(t *testing.T) {
	for _, c := range []struct {
		damage   string
		keepIdx  bool
		last     uint64
		seqs     []uint64
		anyBytes bool
	}{
		{"cut_in_record", true, 6, nil, true},
		{"cut_in_record", false, 5, nil, true},
		{"cut_at_record", true, 6, nil, false},
		{"cut_at_record", false, 4, nil, false},
		{"flip_last", true, 6, nil, false},
		{"flip_last", false, 5, nil, true},
		{"flip_fifth", true, 6, nil, false},
		{"flip_fifth", false, 4, nil, true},
		{"missing_block", true, 6, []uint64{1, 2, 3, 4, 5, 6}, true},
		{"missing_block", false, 0, nil, false},
	} {
		t.Run(fmt.Sprintf("%s/index_kept=%v", c.damage, c.keepIdx), func(t *testing.T) {
			rs := newRollbackServer(t)
			e := rs.e
			projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
			projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)
			rs.stop()
			if !c.keepIdx {
				if err := os.Remove(filepath.Join(rs.msgsDir(), "index.db")); err != nil {
					t.Fatal(err)
				}
			}
			rs.damage(c.damage)
			rs.restart("a")
			st, ld := rs.lost()
			t.Logf("LOST damage=%s index_kept=%v last_seq=%d msgs=%d lost=%s", c.damage, c.keepIdx, st.LastSeq, st.Msgs, showLost(ld))
			if st.LastSeq != c.last || (ld == nil) == (c.seqs != nil || c.anyBytes) ||
				(ld != nil && (!slices.Equal(ld.Msgs, c.seqs) || (ld.Bytes > 0) != c.anyBytes)) {
				t.Errorf("want last_seq=%d lost seqs=%v bytes=%v", c.last, c.seqs, c.anyBytes)
			}
			rs.restart("a")
			if _, ld := rs.lost(); ld != nil {
				t.Errorf("after another restart: lost=%s, want it forgotten", showLost(ld))
			}
		})
	}
}

// The loss nothing else finds: the projector consumed seqs 1..3 and
// stopped; seqs 4..6 were stored after; the server, down, had its block
// cut inside the record of seq 5. It serves the stream without 5 and 6
// and keeps its last sequence (index.db remembers seq 6; without it the
// stream ends at 4): at or past what the projector consumed, with the
// message it consumed (seq 3) whole, and no agent appends to the sessions
// again. Only the server's record of the bytes it dropped tells it: the
// projector raises log_rolled_back at start naming them, and a running
// projector raises it on its next check of the streams.
func TestRolledBackLostOnRecovery(t *testing.T) {
	for _, keepIdx := range []bool{true, false} {
		t.Run(fmt.Sprintf("index_kept=%v", keepIdx), func(t *testing.T) {
			rs := newRollbackServer(t)
			e, ctx := rs.e, rs.e.Ctx
			projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
			data := t.TempDir()
			r := e.Start(data)
			r.WaitReady(t)
			r.WaitSession(t, "early", func(d httpapi.Detail) bool { return d.LastSeq == 3 })
			r.Stop(t)
			projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)

			rs.stop()
			if !keepIdx {
				if err := os.Remove(filepath.Join(rs.msgsDir(), "index.db")); err != nil {
					t.Fatal(err)
				}
			}
			rs.damage("cut_in_fifth")
			rs.restart("a")
			st, ld := rs.lost()
			t.Logf("LOST damage=cut_in_fifth index_kept=%v last_seq=%d msgs=%d lost=%s", keepIdx, st.LastSeq, st.Msgs, showLost(ld))
			if st.LastSeq < 3 {
				t.Fatalf("last seq %d: below the checkpoint, not the case tested", st.LastSeq)
			}
			if m, err := e.LS.MsgAt(ctx, "SESSIONS", 3); err != nil || m == nil {
				t.Fatalf("seq 3 after the damage: %v (%v), want it whole", m, err)
			}

			r2 := e.Start(data)
			err := r2.Ready()
			t.Logf("started: ready = %v", err)
			if err == nil || !strings.Contains(err.Error(), "log_rolled_back: stream SESSIONS: nats-server dropped") {
				t.Fatalf("started on the damaged stream: ready = %v, want log_rolled_back naming what the server dropped", err)
			}
			r2.Stop(t)

			// The server forgets the loss when it restarts; the projector
			// kept it (SESSION_LOST) until an operator acknowledges it. A
			// running projector is told of the next one by its first check
			// after the server recovered (its connection reconnected).
			// An event stored after the loss, for the projector to fold.
			if acked, err := e.LS.AckLost(ctx, "", time.Now()); err != nil || len(acked) != 1 {
				t.Fatalf("ack the loss: %+v (%v), want the one kept", acked, err)
			}
			rs.restart("a")
			projectortest.PublishN(t, e, gen.NewSession("after", projectortest.T0), 1)
			r3 := e.Start(t.TempDir())
			r3.WaitReady(t)
			rs.stop()
			rs.damage("missing_block")
			rs.restart("a")
			r3.CheckStreams(ctx)
			err = r3.Ready()
			t.Logf("running: ready = %v", err)
			if err == nil || !strings.Contains(err.Error(), "log_rolled_back: stream SESSIONS: nats-server lost") {
				t.Fatalf("running, after the server lost a block: ready = %v, want log_rolled_back naming the seqs", err)
			}
		})
	}
}

func showLost(ld *logstore.LostData) string {
	if ld == nil {
		return "none"
	}
	return fmt.Sprintf("{msgs:%v bytes:%d}", ld.Msgs, ld.Bytes)
}

// lost is the stream's status and what the server says now it lost of
// it (its record, not the losses kept: ServerLost).
func (rs *rollbackServer) lost() (logstore.StreamStatus, *logstore.LostData) {
	rs.t.Helper()
	e := rs.e
	st, err := e.LS.StreamStatus(e.Ctx, "SESSIONS")
	if err != nil {
		rs.t.Fatal(err)
	}
	ld, err := e.LS.ServerLost(e.Ctx, "SESSIONS")
	if err != nil {
		rs.t.Fatal(err)
	}
	return st, ld
}

// msgsDir is where the server "a" keeps the stream's block files.
func (rs *rollbackServer) msgsDir() string {
	return filepath.Join(rs.dir, "a", "jetstream", "$G", "streams", "SESSIONS", "msgs")
}

// damage damages the stream's last block file of the stopped server "a":
// cut_in_record cuts 30 bytes off its end (inside the last record),
// cut_in_fifth cuts it in the middle of its fifth record, cut_at_record
// cuts its last two records whole, flip_last and flip_fifth flip a bit
// of the last or the fifth record, missing_block removes it.
func (rs *rollbackServer) damage(how string) {
	rs.t.Helper()
	blks, err := filepath.Glob(filepath.Join(rs.msgsDir(), "*.blk"))
	if err != nil || len(blks) == 0 {
		rs.t.Fatalf("block files %v (%v)", blks, err)
	}
	f := blks[len(blks)-1]
	if how == "missing_block" {
		if err := os.Remove(f); err != nil {
			rs.t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(f)
	if err != nil {
		rs.t.Fatal(err)
	}
	recs := blockRecords(b)
	if len(recs) < 5 {
		rs.t.Fatalf("block of %d records", len(recs))
	}
	switch how {
	case "cut_in_record":
		b = b[:len(b)-30]
	case "cut_in_fifth":
		b = b[:recs[4]+30]
	case "cut_at_record":
		b = b[:recs[len(recs)-2]]
	case "flip_last":
		b[len(b)-40] ^= 0x10
	case "flip_fifth":
		b[recs[4]+30] ^= 0x10
	default:
		rs.t.Fatalf("damage %q", how)
	}
	if err := os.WriteFile(f, b, 0o644); err != nil {
		rs.t.Fatal(err)
	}
}

// blockRecords are the offsets of a block file's records: each begins
// with its length (little-endian uint32, the top bit saying it has
// headers).
func blockRecords(b []byte) []int {
	var out []int
	for i := 0; i+22 <= len(b); {
		rl := int(binary.LittleEndian.Uint32(b[i:]) &^ (1 << 31))
		if rl < 22 {
			break
		}
		out = append(out, i)
		i += rl
	}
	return out
}

// On three replicas the record is of the node that answers, which may
// have caught up from the others since: a follower's block file removed
// while it was down, the follower restarted and made the stream's leader.
// The test logs what the server's record says and what the stream holds;
// StreamLost keeps only the named sequences the stream does not hold now,
// and a projector started then is rolled back exactly when it names some.
func TestLostDataReplica(t *testing.T) {
	c, e := projectortest.ClusterEnv(t)
	leader := c.WaitStreamLeader(logstore.StreamName)
	projectortest.PublishN(t, e, gen.NewSession("early", projectortest.T0), 3)
	projectortest.PublishN(t, e, gen.NewSession("late", projectortest.T0), 3)
	c.WaitStreamsCurrent(logstore.StreamName)

	f := (leader + 1) % 3
	c.Servers[f].Shutdown()
	c.Servers[f].WaitForShutdown()
	blks, err := filepath.Glob(filepath.Join(c.Opts[f].StoreDir, "jetstream", "$G", "streams", logstore.StreamName, "msgs", "*.blk"))
	if err != nil || len(blks) != 1 {
		t.Fatalf("block files %v (%v)", blks, err)
	}
	if err := os.Remove(blks[0]); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	c.WaitStreamsCurrent(logstore.StreamName)
	name := c.Servers[f].Name()
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if c.StreamLeader(logstore.StreamName) == f {
			return nil
		}
		_, _ = e.NC.Request("$JS.API.STREAM.LEADER.STEPDOWN."+logstore.StreamName, []byte(`{"placement":{"preferred":"`+name+`"}}`), 2*time.Second)
		return fmt.Errorf("%s does not lead yet", name)
	})
	var raw struct {
		State struct {
			Lost *logstore.LostData `json:"lost"`
		} `json:"state"`
	}
	m, err := e.NC.Request("$JS.API.STREAM.INFO."+logstore.StreamName, []byte(`{"deleted_details":true}`), 5*time.Second)
	if err != nil || json.Unmarshal(m.Data, &raw) != nil {
		t.Fatalf("stream info: %v", err)
	}
	var held []uint64
	for seq := uint64(1); seq <= 6; seq++ {
		if m, err := e.LS.MsgAt(e.Ctx, logstore.StreamName, seq); err == nil && m != nil {
			held = append(held, seq)
		}
	}
	ld, err := e.LS.StreamLost(e.Ctx, logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LOST replicas=3 damage=missing_block on the follower, which leads now: record=%s held=%v StreamLost=%s", showLost(raw.State.Lost), held, showLost(ld))
	var want []uint64
	if raw.State.Lost != nil {
		for _, q := range raw.State.Lost.Msgs {
			if !slices.Contains(held, q) {
				want = append(want, q)
			}
		}
	}
	if (ld == nil) != (len(want) == 0) || (ld != nil && !slices.Equal(ld.Msgs, want)) {
		t.Errorf("StreamLost = %s, want the named seqs not held: %v", showLost(ld), want)
	}
	r := e.Start(t.TempDir())
	err = r.Ready()
	t.Logf("started: ready = %v", err)
	if rolled := err != nil && strings.Contains(err.Error(), "log_rolled_back"); rolled != (len(want) > 0) {
		t.Errorf("ready = %v, want rolled back %v", err, len(want) > 0)
	}
}
