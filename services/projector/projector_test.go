package projector_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// TestCatchUpServesViewsEqualToRebuild: on one stream and on three
// partitions, on one node and on an R3 cluster.
func TestCatchUpServesViewsEqualToRebuild(t *testing.T) { natstest.ForEachLayout(t, testCatchUp) }

func testCatchUp(t *testing.T, l natstest.Layout) {
	e := projectortest.NewEnvLayout(t, l)
	fleet := gen.NewFleet("s", 20, 1, projectortest.T0)
	if _, err := fleet.Fill(e.Ctx, e.LS, 3000); err != nil {
		t.Fatal(err)
	}
	// Small batches and snapshots and a tiny cache: eviction and restore
	// from snapshot + log are exercised too.
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.MaxBatchEvents = 97; c.CacheSessions = 5; c.SnapshotEvery = 7 })
	r.WaitReady(t)

	var list httpapi.List
	r.GetJSON(t, "/v1/sessions?limit=7", &list)
	if len(list.Sessions) != 7 || list.Next == "" {
		t.Fatalf("first page: %d sessions, next %q", len(list.Sessions), list.Next)
	}
	seen := map[string]bool{}
	var prev time.Time
	pages := 0
	for {
		for _, s := range list.Sessions {
			if seen[s.SessionID] {
				t.Fatalf("session %s listed twice", s.SessionID)
			}
			seen[s.SessionID] = true
			if !prev.IsZero() && s.LastActivity.After(prev) {
				t.Fatalf("list not ordered by newest activity: %s after %s", s.LastActivity, prev)
			}
			prev = s.LastActivity
		}
		pages++
		if list.Next == "" {
			break
		}
		next := list.Next
		list = httpapi.List{}
		r.GetJSON(t, "/v1/sessions?limit=7&after="+next, &list)
	}
	if len(seen) != 20 || pages != 3 {
		t.Fatalf("listed %d sessions in %d pages, want 20 in 3", len(seen), pages)
	}

	for _, s := range fleet.Sessions {
		var d httpapi.Detail
		r.GetJSON(t, "/v1/sessions/"+s.ID, &d)
		// The status and problem too: a fold that stopped (a gap or an
		// unreadable message) says where and why.
		if d.LastSeq != s.Seq() {
			t.Fatalf("%s: lastSeq %d, generated %d (status %s, problem %+v)", s.ID, d.LastSeq, s.Seq(), d.Status, d.Problem)
		}
		if d.Status != projector.StatusActive && d.Status != projector.StatusIdle {
			t.Fatalf("%s: status %s (problem %+v)", s.ID, d.Status, d.Problem)
		}
	}

	// Events: pages read from the log, exactly the seqs asked for.
	s0 := fleet.Sessions[0]
	var got []uint64
	after := uint64(0)
	for {
		var ev httpapi.Events
		r.GetJSON(t, fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=13", s0.ID, after), &ev)
		for _, raw := range ev.Events {
			var env schema.Envelope
			json.Unmarshal(raw, &env)
			got = append(got, env.Seq)
		}
		if !ev.More {
			break
		}
		after = ev.Next
	}
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("events: position %d has seq %d", i, seq)
		}
	}
	if uint64(len(got)) != s0.Seq() {
		t.Fatalf("events: %d, want %d", len(got), s0.Seq())
	}
	var mid httpapi.Events
	r.GetJSON(t, fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=2", s0.ID, s0.Seq()-3), &mid)
	if len(mid.Events) != 2 || mid.Next != s0.Seq()-1 || !mid.More {
		t.Fatalf("events after %d: %d events next %d more %v", s0.Seq()-3, len(mid.Events), mid.Next, mid.More)
	}

	// Status filter: every listed session has that status.
	var idle httpapi.List
	r.GetJSON(t, "/v1/sessions?status=idle&limit=1000", &idle)
	for _, s := range idle.Sessions {
		if s.Status != projector.StatusIdle {
			t.Fatalf("status=idle listed %s with %s", s.SessionID, s.Status)
		}
	}
	projectortest.CheckRebuild(t, e, r)
}

func TestRebuildOnVersionChecksumOrCorruption(t *testing.T) {
	e := projectortest.NewEnv(t)
	fleet := gen.NewFleet("v", 5, 2, projectortest.T0)
	fleet.Fill(e.Ctx, e.LS, 500)
	dir := t.TempDir()

	restart := func(damage func(db *store.DB)) projector.StartMode {
		t.Helper()
		r := e.Start(dir)
		r.WaitReady(t)
		r.Stop(t)
		db, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		damage(db)
		db.Close()
		r = e.Start(dir)
		r.WaitReady(t)
		projectortest.CheckRebuild(t, e, r)
		r.Stop(t)
		return r.Mode()
	}

	t.Run("Resume", func(t *testing.T) {
		m := restart(func(*store.DB) {})
		if m.Rebuild {
			t.Fatalf("clean restart rebuilt: %s", m.Reason)
		}
	})
	t.Run("ReducerVersion", func(t *testing.T) {
		m := restart(func(db *store.DB) {
			cp, _, _ := db.Checkpoint()
			cp.Version = "reducer=0,views=1"
			db.SetCheckpointRaw(store.EncodeCheckpoint(cp))
		})
		if !m.Rebuild {
			t.Fatal("an older reducer version did not force a rebuild")
		}
	})
	t.Run("CorruptCheckpoint", func(t *testing.T) {
		m := restart(func(db *store.DB) {
			v, _, _ := db.Get([]byte("zc"))
			v[3] ^= 0x20 // one bit: the CRC catches it
			db.SetCheckpointRaw(v)
		})
		if !m.Rebuild || m.Reason != "corrupt checkpoint" {
			t.Fatalf("corrupt checkpoint: %+v", m)
		}
	})
	t.Run("CorruptPosition", func(t *testing.T) {
		// A well-formed checkpoint naming a position the views do not
		// reflect is caught by the checksum... only if the views differ:
		// here the checksum of the views is changed under it.
		m := restart(func(db *store.DB) {
			db.RawPut(store.SummaryKey("v-0"), []byte(`{"sessionId":"v-0","status":"idle"}`))
		})
		if !m.Rebuild {
			t.Fatal("a view that does not match the checksum did not force a rebuild")
		}
	})
}

func TestVerifyDetectsDamagedViews(t *testing.T) {
	e := projectortest.NewEnv(t)
	gen.NewFleet("x", 3, 3, projectortest.T0).Fill(e.Ctx, e.LS, 200)
	dir := t.TempDir()
	r := e.Start(dir)
	r.WaitReady(t)
	r.Stop(t)
	res, err := projector.Verify(e.Ctx, e.LS, dir, filepath.Join(t.TempDir(), "v1"), nil)
	if err != nil || !res.OK() {
		t.Fatalf("clean store: %+v %v", res, err)
	}
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.RawPut(store.SummaryKey("x-1"), []byte(`{"sessionId":"x-1","status":"closed"}`))
	db.Close()
	res, err = projector.Verify(e.Ctx, e.LS, dir, filepath.Join(t.TempDir(), "v2"), nil)
	if err != nil || res.OK() || res.Scanned == res.Rebuilt {
		t.Fatalf("damaged store verified: %+v %v", res, err)
	}
}

// TestSessionReloadedWhileItsBatchIsInFlight: each batch stays in flight
// (handed to the store, not yet in Pebble) until the fold loop waits for
// it, and a cache of one session evicts at every batch, so the fold loop
// keeps reloading sessions whose last changes are in the batch in flight.
// It must read them only once that batch has landed: the views equal a
// clean rebuild, and the stored checksum the scanned one.
func TestSessionReloadedWhileItsBatchIsInFlight(t *testing.T) {
	e := projectortest.NewEnv(t)
	fleet := gen.NewFleet("inflight", 4, 3, projectortest.T0)
	if _, err := fleet.Fill(e.Ctx, e.LS, 400); err != nil {
		t.Fatal(err)
	}
	var release func()
	r := e.StartPrepared(t.TempDir(), func(s *projector.Service) { release = projector.HoldCommits(s) },
		func(c *projector.Config) { c.MaxBatchEvents = 13; c.CacheSessions = 1; c.SnapshotEvery = 5 })
	// Registered after start's stop, so it runs first: a fold loop that
	// stopped on an error does not wait for its last batch.
	t.Cleanup(release)
	r.WaitReady(t)
	for _, s := range fleet.Sessions {
		var d httpapi.Detail
		r.GetJSON(t, "/v1/sessions/"+s.ID, &d)
		if d.LastSeq != s.Seq() {
			t.Fatalf("%s: lastSeq %d, generated %d", s.ID, d.LastSeq, s.Seq())
		}
	}
	projectortest.CheckRebuild(t, e, r)
}
