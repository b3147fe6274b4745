package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/netproxy"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestWatchReconnectAndTransient: on one stream and on three partitions,
// on one node and on an R3 cluster.
func TestWatchReconnectAndTransient(t *testing.T) {
	natstest.ForEachLayout(t, testWatchReconnectAndTransient)
}

func testWatchReconnectAndTransient(t *testing.T, l natstest.Layout) {
	e := projectortest.NewEnvLayout(t, l)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	s := gen.NewSession("w", projectortest.T0)
	projectortest.PublishN(t, e, s, 10)
	r.WaitSession(t, "w", func(d httpapi.Detail) bool { return d.LastSeq == 10 })

	ctx, cancel := context.WithCancel(e.Ctx)
	ch, _ := projectortest.SSE(t, ctx, r.Srv.URL+"/v1/sessions/w/watch?after=0", "")
	for want := uint64(1); want <= 6; want++ {
		ev := projectortest.Next(t, ch, true)
		if ev.Kind != "durable" || ev.Data.Seq != want || ev.ID != strconv.FormatUint(want, 10) || ev.Data.Transient {
			t.Fatalf("event %d: %+v", want, ev)
		}
	}
	// The client drops after seq 6; more events are appended meanwhile.
	cancel()
	projectortest.PublishN(t, e, s, 5)

	ctx, cancel = context.WithCancel(e.Ctx)
	defer cancel()
	// The original URL says after=0; Last-Event-ID wins, as a browser's
	// EventSource reconnect sends it.
	ch, _ = projectortest.SSE(t, ctx, r.Srv.URL+"/v1/sessions/w/watch?after=0", "6")
	for want := uint64(7); want <= 15; want++ {
		ev := projectortest.Next(t, ch, true)
		if ev.Kind != "durable" || ev.Data.Seq != want {
			t.Fatalf("after reconnect, want seq %d: %+v", want, ev)
		}
	}

	// Live: a transient event following seq 15 arrives marked, with id 15;
	// one naming a future seq waits for it; a stale one is not sent.
	live, _ := logstore.LiveSubject("w")
	pubLive := func(after uint64, text string) {
		b, _ := json.Marshal(map[string]any{"afterSeq": after, "kind": "delta", "text": text})
		if err := e.NC.Publish(live, b); err != nil {
			t.Fatal(err)
		}
		e.NC.Flush()
	}
	pubLive(3, "stale")
	pubLive(16, "early")
	pubLive(15, "now")
	ev := projectortest.Next(t, ch, true)
	if ev.Kind != "transient" || !ev.Data.Transient || ev.ID != "15" || *ev.Data.AfterSeq != 15 || !strings.Contains(string(ev.Data.Event), `"now"`) {
		t.Fatalf("transient: %+v %s", ev, ev.Data.Event)
	}
	projectortest.PublishN(t, e, s, 1)
	ev = projectortest.Next(t, ch, true)
	if ev.Kind != "durable" || ev.Data.Seq != 16 {
		t.Fatalf("live durable: %+v", ev)
	}
	ev = projectortest.Next(t, ch, true)
	if ev.Kind != "transient" || ev.ID != "16" || !strings.Contains(string(ev.Data.Event), `"early"`) {
		t.Fatalf("held transient: %+v %s", ev, ev.Data.Event)
	}
	// Idle: heartbeats keep the connection open.
	if ev := projectortest.Next(t, ch, false); ev.Kind != "ping" {
		t.Fatalf("want a ping, got %+v", ev)
	}
}

// TestWatchHugeAfterDoesNotHang: a watch after the session's last event
// is refused at once, however far after; one at the last event waits,
// sending heartbeats (the HTTP side alone over a session of three
// events: projectortest.Serve).
func TestWatchHugeAfterDoesNotHang(t *testing.T) {
	l := projectortest.NewMem(t)
	h := gen.NewSession("h", projectortest.T0)
	projectortest.AppendMem(t, l, h.Next(), h.Next(), h.Next())
	r := projectortest.Serve(t, l)
	for _, after := range []string{"4", "1000000", fmt.Sprint(uint64(1 << 63)), "18446744073709551615"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", r.Srv.URL+"/v1/sessions/h/watch?after="+after, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("after=%s: %v", after, err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != 400 {
			t.Fatalf("after=%s: %d, want 400", after, resp.StatusCode)
		}
	}
	// The tail itself is fine: the client waits for what comes next.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := projectortest.SSE(t, ctx, r.Srv.URL+"/v1/sessions/h/watch?after=3", "")
	if ev := projectortest.Next(t, ch, false); ev.Kind != "ping" {
		t.Fatalf("at the tail: %s %s %s", ev.Kind, ev.ID, ev.Raw)
	}
}

// memFigures reads the heap in use after a GC and the process's RSS.
func memFigures() (heap, rss uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb << 10
		}
	}
	return ms.HeapInuse, rss
}

// TestWatchMemoryBound: 50 watchers that read nothing on a 24 MB session,
// while transient events flood in (under and over the size limit), hold
// at most their byte budget each: the heap in use grows by less than
// 50 × (QueueBytes + page + 2 events) + 64 MiB. When they finally read,
// each gets durable events 1..k in order, then an "error" event
// slow_consumer with resumeAfter k, and a reconnect after k gets the rest
// exactly once. A watcher that reads gets every durable event exactly once
// in order and every transient event under the limit, none over it.
func TestWatchMemoryBound(t *testing.T) {
	const (
		watchers   = 50
		events     = 120       // after session/created
		eventBytes = 200 << 10 // content of each: 24 MB in all
		queueBytes = 1 << 20
		trSmall    = 100 // transient events under the limit (48 KiB)
		trLarge    = 40  // over it (512 KiB)
	)
	e := projectortest.NewEnv(t)
	reg := prometheus.NewRegistry()
	r := e.Start(t.TempDir(), func(c *projector.Config) {
		c.Registerer = reg
		c.Heartbeat = time.Hour // pings would only add writes to blocked streams
		c.Watch = httpapi.WatchLimits{QueueBytes: queueBytes, PageBytes: 1 << 20, MaxTransientBytes: 64 << 10, WriteTimeout: 5 * time.Minute}
	})
	r.WaitReady(t)

	const id = "big"
	last, err := gen.LargeSession(e.Ctx, e.LS, id, events, eventBytes, projectortest.T0)
	if err != nil {
		t.Fatal(err)
	}
	r.WaitSession(t, id, func(d httpapi.Detail) bool { return d.LastSeq == last })
	heap0, rss0 := memFigures()

	// The slow watchers, with a small receive buffer (loopback would
	// otherwise take tens of MB into the kernel).
	url := r.Srv.URL + "/v1/sessions/" + id + "/watch?after=0"
	slowClient := netproxy.FarClient(64 << 10)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var slow []*http.Response
	for range watchers {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := slowClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("watch: %d", resp.StatusCode)
		}
		defer resp.Body.Close()
		slow = append(slow, resp)
	}
	// The reader.
	rch, _ := projectortest.SSE(t, ctx, url, "")
	for want := uint64(1); want <= last; want++ {
		if ev := projectortest.Next(t, rch, true); ev.Kind != "durable" || ev.Data.Seq != want {
			t.Fatalf("reader: want durable %d, got %s %s", want, ev.Kind, ev.ID)
		}
	}

	// The flood, in rounds the reader keeps up with (its own budget is
	// 1 MiB too); a large one in every round is dropped for everyone.
	subj, _ := logstore.LiveSubject(id)
	small := strings.Repeat("y", 48<<10)
	large := strings.Repeat("z", 512<<10)
	var peak uint64
	for n := 0; n < trSmall; n++ {
		b, _ := json.Marshal(map[string]any{"afterSeq": last, "n": n, "text": small})
		if err := e.NC.Publish(subj, b); err != nil {
			t.Fatal(err)
		}
		if n%10 == 9 && n/10 < trLarge {
			for range trLarge / (trSmall / 10) {
				b, _ := json.Marshal(map[string]any{"afterSeq": last, "n": -1, "text": large})
				if err := e.NC.Publish(subj, b); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n%10 == 9 {
			e.NC.Flush()
			for want := n - 9; want <= n; want++ {
				ev := projectortest.Next(t, rch, true)
				var got struct{ N int }
				json.Unmarshal(ev.Data.Event, &got)
				if ev.Kind != "transient" || ev.ID != strconv.FormatUint(last, 10) || got.N != want {
					t.Fatalf("reader: want transient %d after %d, got %s id %s n %d", want, last, ev.Kind, ev.ID, got.N)
				}
			}
			// What is live after a collection: the heap in use just
			// before one also holds garbage, as much as the collector's
			// pacing lets build up, which says nothing of the watches
			// (e2e TestWatchMemoryBoundRSS bounds the projector process's
			// peak RSS, garbage included, against its memory budget).
			h, _ := memFigures()
			peak = max(peak, h)
		}
	}
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if got := projectortest.CounterValue(t, reg, "sessionlog_projector_transient_dropped_total", "too_large"); got != trLarge {
			return fmt.Errorf("%v transient events dropped as too large, want %d", got, trLarge)
		}
		return nil
	})
	heap1, rss1 := memFigures()
	// Per watch: its queue, a page of durable events, two events in hand.
	bound := uint64(watchers*(queueBytes+(1<<20+4<<10)+2*(eventBytes+4<<10)) + 64<<20)
	t.Logf("%d watchers that do not read on a %d MB session, %d transient events of 48 KiB and %d of 512 KiB: heap in use %d -> %d MiB (live peak %d MiB, growth %d MiB, bound %d MiB), RSS %d -> %d MiB",
		watchers, (events*eventBytes)>>20, trSmall, trLarge, heap0>>20, heap1>>20, peak>>20, (heap1-min(heap0, heap1))>>20, bound>>20, rss0>>20, rss1>>20)
	if heap1 > heap0 && heap1-heap0 > bound {
		t.Errorf("heap in use grew by %d MiB, bound %d MiB", (heap1-heap0)>>20, bound>>20)
	}
	if peak > heap0 && peak-heap0 > bound+(64<<20) {
		t.Errorf("live heap peaked %d MiB above the start, bound %d MiB", (peak-heap0)>>20, (bound+(64<<20))>>20)
	}

	// The slow watchers finally read: durable events 1..k in order, then
	// slow_consumer with resumeAfter k; nothing after it.
	resume := make([]uint64, watchers)
	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for i, resp := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen uint64
			var end *httpapi.WatchEnd
			err := projectortest.ReadSSE(resp.Body, func(id, kind string, ev httpapi.WatchEvent, raw string) {
				switch {
				case end != nil:
					errs <- fmt.Errorf("watcher %d: %s %s after the error event", i, kind, id)
				case kind == "durable":
					if ev.Seq != seen+1 || id != strconv.FormatUint(ev.Seq, 10) {
						errs <- fmt.Errorf("watcher %d: durable %d (id %s) after %d", i, ev.Seq, id, seen)
					}
					seen = ev.Seq
				case kind == "transient":
					if *ev.AfterSeq != seen {
						errs <- fmt.Errorf("watcher %d: transient after %d at %d", i, *ev.AfterSeq, seen)
					}
				case kind == "error":
					end = &httpapi.WatchEnd{}
					if err := json.Unmarshal([]byte(raw), end); err != nil || end.Error.Code != httpapi.CodeSlowConsumer || end.ResumeAfter != seen || id != strconv.FormatUint(seen, 10) {
						errs <- fmt.Errorf("watcher %d: error event id %s %s after %d (%v)", i, id, raw, seen, err)
					}
				}
			})
			if err != nil {
				errs <- fmt.Errorf("watcher %d: %w", i, err)
			}
			if end == nil {
				errs <- fmt.Errorf("watcher %d: stream ended after durable %d without the error event", i, seen)
			}
			resume[i] = seen
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if got := projectortest.CounterValue(t, reg, "sessionlog_projector_watches_ended_total", httpapi.CodeSlowConsumer); got != watchers {
		t.Errorf("%v watches ended as slow consumers, want %d", got, watchers)
	}
	t.Logf("slow watchers got durable events up to seq %d..%d before slow_consumer", minOf(resume), maxOf(resume))

	// Reconnecting with Last-Event-ID = resumeAfter gets the rest once.
	for _, i := range []int{0, watchers - 1} {
		ch, _ := projectortest.SSE(t, ctx, url, strconv.FormatUint(resume[i], 10))
		for want := resume[i] + 1; want <= last; want++ {
			if ev := projectortest.Next(t, ch, true); ev.Kind != "durable" || ev.Data.Seq != want {
				t.Fatalf("watcher %d resumed after %d: want durable %d, got %s %s", i, resume[i], want, ev.Kind, ev.ID)
			}
		}
	}
	if got := projectortest.CounterValue(t, reg, "sessionlog_projector_watches_ended_total", httpapi.CodeSlowConsumer); got != watchers {
		t.Errorf("the reader or a resumed watcher was ended: %v slow consumers, want %d", got, watchers)
	}
}

func minOf(v []uint64) uint64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []uint64) uint64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
