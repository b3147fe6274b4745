package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/netproxy"
)

// The watchers' memory bound, in the resident set of a `sessionlog
// projector` process as deployed, garbage and all: 50 clients watch a 24
// MB session and never read while 100 transient events of 48 KiB and 40 of
// 512 KiB go past; one more client reads everything. Each watch holds at
// most its queue, a page of durable events and two events in hand, so the
// process's peak RSS stays within its memory budget (--memory-limit, the
// heap's soft limit) plus what the runtime keeps beside the heap; watches
// that held what their clients did not take (24 MB of durable events and
// 5 MB of transient ones each) would need over a gigabyte.
// (services/projector TestWatchMemoryBound bounds the live heap of the
// same load in process.)
func TestWatchMemoryBoundRSS(t *testing.T) {
	const (
		watchers   = 50
		events     = 120       // after session/created
		eventBytes = 200 << 10 // content of each: 24 MB in all
		queueBytes = 1 << 20
		pageBytes  = 1 << 20 // the projector's default
		trSmall    = 100     // transient events under the limit (48 KiB)
		trLarge    = 40      // over it (512 KiB)
		// The budget: what the watches may hold (queue, page, two events
		// each) plus 64 MiB for the rest of the projector.
		budget = watchers*(queueBytes+pageBytes+4<<10+2*(eventBytes+4<<10)) + 64<<20
		// Beside the heap: goroutine stacks, the runtime's own structures,
		// Pebble's block cache and memtable.
		margin = 128 << 20
	)
	page := pageBytes
	if v := os.Getenv("SESSIONLOG_TEST_WATCH_PAGE_BYTES"); v != "" {
		// Only to show the test failing: watches that read the whole
		// session ahead of clients that do not take it. (A queue without
		// bound would not show here: the transient events are one message
		// that every watch's queue shares.)
		page, _ = strconv.Atoi(v)
	}
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	// Every read below ends with the context: a stream that stalls fails
	// the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ls, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "big"
	last, err := gen.LargeSession(ctx, ls, id, events, eventBytes, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}

	p := startProjectorProc(t, []string{"--nats-url", s.ClientURL(), "--no-provision",
		"--data-dir", filepath.Join(t.TempDir(), "views"), "--log-level", "warn",
		"--memory-limit", strconv.Itoa(budget), "--watch-queue-bytes", strconv.Itoa(queueBytes), "--watch-page-bytes", strconv.Itoa(page)})
	p.runUntil(t, func(_ float64, ready bool) bool { return ready })
	base := p.status(t, "VmRSS")

	url := "http://" + p.addr + "/v1/sessions/" + id + "/watch?after=0"
	// The slow watchers, with a small receive buffer (loopback would
	// otherwise take tens of MB into the kernel).
	slowClient := netproxy.FarClient(64 << 10)
	var slow []*http.Response
	for range watchers {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := slowClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("watch: %d", resp.StatusCode)
		}
		slow = append(slow, resp)
	}
	// The reader.
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 1<<20)
	for want := uint64(1); want <= last; want++ {
		if kind, id, _ := readWatchEvent(t, rd); kind != "durable" || id != strconv.FormatUint(want, 10) {
			t.Fatalf("reader: want durable %d, got %s %s", want, kind, id)
		}
	}

	// The flood, in rounds the reader keeps up with; a large one in every
	// round is dropped for everyone.
	subj, _ := logstore.LiveSubject(id)
	small := strings.Repeat("y", 48<<10)
	large := strings.Repeat("z", 512<<10)
	for n := 0; n < trSmall; n++ {
		b, _ := json.Marshal(map[string]any{"afterSeq": last, "n": n, "text": small})
		if err := nc.Publish(subj, b); err != nil {
			t.Fatal(err)
		}
		if n%10 == 9 {
			for range trLarge / (trSmall / 10) {
				b, _ := json.Marshal(map[string]any{"afterSeq": last, "n": -1, "text": large})
				if err := nc.Publish(subj, b); err != nil {
					t.Fatal(err)
				}
			}
			nc.Flush()
			for want := n - 9; want <= n; want++ {
				kind, id, data := readWatchEvent(t, rd)
				var got struct {
					Event struct{ N int }
				}
				json.Unmarshal([]byte(data), &got)
				if kind != "transient" || id != strconv.FormatUint(last, 10) || got.Event.N != want {
					t.Fatalf("reader: want transient %d after %d, got %s id %s n %d: %.200s", want, last, kind, id, got.Event.N, data)
				}
			}
		}
	}
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		_, body, err := httpGet("http://" + p.addr + "/metrics")
		if err != nil {
			return err
		}
		if got := metricValue(body, `sessionlog_projector_transient_dropped_total{reason="too_large"}`); got != trLarge {
			return fmt.Errorf("%v transient events dropped as too large, want %d", got, trLarge)
		}
		return nil
	})
	peak, now := p.status(t, "VmHWM"), p.status(t, "VmRSS")
	t.Logf("%d watchers that do not read on a %d MB session, %d transient events of 48 KiB and %d of 512 KiB: projector RSS %d MiB ready, %d MiB now, peak %d MiB; budget %d MiB + %d MiB beside the heap",
		watchers, (events*eventBytes)>>20, trSmall, trLarge, base>>20, now>>20, peak>>20, budget>>20, margin>>20)
	if peak > budget+margin {
		t.Errorf("the projector's peak RSS is %d MiB, over its budget of %d MiB and %d MiB beside the heap", peak>>20, budget>>20, margin>>20)
	}

	// The slow watchers were held, not served: reading now, each gets
	// durable events and then slow_consumer.
	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for i, resp := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := bufio.NewReader(resp.Body)
			for {
				kind, _, data := readWatchEvent(t, rd)
				switch kind {
				case "durable", "transient":
					continue
				case "error":
					if !strings.Contains(data, `"slow_consumer"`) {
						errs <- fmt.Errorf("watcher %d: error event %s", i, data)
					}
				default:
					errs <- fmt.Errorf("watcher %d: %q event %s", i, kind, data)
				}
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// readWatchEvent reads one server-sent event: its name, id and data ("" at
// the end of the stream). Comments (pings) are skipped.
func readWatchEvent(t *testing.T, rd *bufio.Reader) (kind, id, data string) {
	t.Helper()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return "", "", ""
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if kind != "" || data != "" {
				return kind, id, data
			}
		case strings.HasPrefix(line, "event: "):
			kind = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			data += line[len("data: "):]
		}
	}
}

// status reads a size field (VmRSS, VmHWM) of the process's /proc status,
// in bytes.
func (p *projectorProc) status(t *testing.T, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
	return 0
}
