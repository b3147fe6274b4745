package writer_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// okReply is one committed append as its sender saw it.
type okReply struct {
	seq     uint64
	eventID string
}

// race runs eight goroutines appending to one session with explicit
// expectedSeq until it holds total events; each learns the tail only from
// its own replies and conflicts (currentSeq).
func race(t *testing.T, conns []*nats.Conn, sid string, total uint64) []okReply {
	t.Helper()
	mustOK(t, conns[0], map[string]any{"sessionId": sid, "expectedSeq": 0, "events": events(created())})
	var (
		mu  sync.Mutex
		oks []okReply
		wg  sync.WaitGroup
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc := conns[g%len(conns)]
			cur := uint64(1)
			for n := 0; cur < total; n++ {
				id := fmt.Sprintf("g%d-%d", g, n)
				r := appendReq(t, nc, map[string]any{"sessionId": sid, "expectedSeq": cur, "events": events(
					ev(schema.TypeMessageUser, "eventId", id, "data", map[string]any{"content": id}))})
				switch {
				case r.err == nil:
					// duplicate is a commit too: the writer resent the
					// request itself after a lost acknowledgement (a
					// loaded cluster) and the stream had it already.
					if r.ok.FirstSeq != cur+1 {
						t.Errorf("%s: reply %+v after expectedSeq %d", id, r.ok, cur)
						return
					}
					mu.Lock()
					oks = append(oks, okReply{seq: r.ok.FirstSeq, eventID: id})
					mu.Unlock()
					cur = r.ok.LastSeq
				case r.err.Code == schema.CodeConflict && r.err.CurrentSeq != nil:
					if *r.err.CurrentSeq <= cur {
						t.Errorf("%s: conflict at expectedSeq %d reports currentSeq %d", id, cur, *r.err.CurrentSeq)
						return
					}
					cur = *r.err.CurrentSeq
				default:
					t.Errorf("%s: %s: %s", id, r.err.Code, r.err.Message)
					return
				}
			}
		}()
	}
	wg.Wait()
	return oks
}

func checkRace(t *testing.T, st *logstore.Store, sid string, total uint64, oks []okReply) {
	t.Helper()
	evs := stored(t, st, sid)
	if err := checkContiguous(evs); err != nil {
		t.Fatal(err)
	}
	// Racers stop once they see total; the last winners may overshoot by
	// nothing: every append names the tail it read.
	if uint64(len(evs)) != total {
		t.Fatalf("%d events stored, want %d", len(evs), total)
	}
	if len(oks) != len(evs)-1 {
		t.Fatalf("%d ok replies for %d appended events", len(oks), len(evs)-1)
	}
	seen := map[string]bool{}
	for _, ok := range oks {
		got := evs[ok.seq-1]
		if got.EventID != ok.eventID {
			t.Fatalf("reply said %s at seq %d, stored is %s", ok.eventID, ok.seq, got.EventID)
		}
		if seen[ok.eventID] {
			t.Fatalf("%s acknowledged twice", ok.eventID)
		}
		seen[ok.eventID] = true
	}
}

// Eight goroutines racing with explicit expectedSeq through one writer:
// one event per seq, every ok reply stored exactly once, no gap; on every
// layout.
func TestRaceExpectedSeq(t *testing.T) { natstest.ForEachLayout(t, testRaceExpectedSeq) }

func testRaceExpectedSeq(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l, envOpts{})
	const total = 200
	oks := race(t, []*nats.Conn{e.nc}, "race", total)
	checkRace(t, e.st, "race", total, oks)
}

// The same with two writer instances (own connections, stores and caches)
// sharing the queue group: they order each other only through the
// per-subject check. On every layout (on a cluster the second writer
// connects to the second node only).
func TestRaceTwoWriters(t *testing.T) { natstest.ForEachLayout(t, testRaceTwoWriters) }

func testRaceTwoWriters(t *testing.T, l natstest.Layout) {
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	e := newEnvLayout(t, l, envOpts{writer: writer.Config{Registerer: reg1}})
	url := e.url
	if e.dep.Cluster != nil {
		url = e.dep.Cluster.Servers[1].ClientURL()
	}
	e2 := newEnv(t, envOpts{url: url, store: e.st.Config(), writer: writer.Config{Registerer: reg2}})
	const total = 200
	oks := race(t, []*nats.Conn{e.nc, e2.nc}, "race2", total)
	checkRace(t, e.st, "race2", total, oks)
	for i, reg := range []*prometheus.Registry{reg1, reg2} {
		if n := counterSum(t, reg, "sessionlog_writer_appends_total"); n == 0 {
			t.Fatalf("writer %d answered no append", i)
		}
	}
	// And appends without expectedSeq through both: the writers retry
	// their conflicts themselves, so every request commits.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc := []*nats.Conn{e.nc, e2.nc}[g%2]
			for n := 0; n < 20; n++ {
				r := appendReq(t, nc, map[string]any{"sessionId": "race2", "events": events(
					ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
				if r.err != nil {
					t.Errorf("no expectedSeq: %s: %s", r.err.Code, r.err.Message)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := stored(t, e.st, "race2")
	if err := checkContiguous(evs); err != nil || len(evs) != total+160 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
}
