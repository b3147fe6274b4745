package projector_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/loadgen"
)

type sseEvent struct {
	id, kind string
	data     projector.WatchEvent
}

// sse reads a watch stream and delivers its events (pings as kind "ping").
func sse(t *testing.T, ctx context.Context, url, lastEventID string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur sseEvent
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.kind != "" {
					json.Unmarshal([]byte(data), &cur.data)
					ch <- cur
				}
				cur, data = sseEvent{}, ""
			case line == ": ping":
				ch <- sseEvent{kind: "ping"}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			}
		}
	}()
	return ch, resp
}

func next(t *testing.T, ch <-chan sseEvent, skipPings bool) sseEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch stream ended")
			}
			if ev.kind == "ping" && skipPings {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event within 10s")
		}
	}
}

func TestWatchReconnectAndTransient(t *testing.T) {
	e := newEnv(t)
	r := e.start(t.TempDir())
	r.waitReady(t)
	s := loadgen.NewSession("w", t0)
	publishN(t, e, s, 10)
	r.waitSession(t, "w", func(d projector.Detail) bool { return d.LastSeq == 10 })

	ctx, cancel := context.WithCancel(e.ctx)
	ch, _ := sse(t, ctx, r.srv.URL+"/v1/sessions/w/watch?after=0", "")
	for want := uint64(1); want <= 6; want++ {
		ev := next(t, ch, true)
		if ev.kind != "durable" || ev.data.Seq != want || ev.id != strconv.FormatUint(want, 10) || ev.data.Transient {
			t.Fatalf("event %d: %+v", want, ev)
		}
	}
	// The client drops after seq 6; more events are appended meanwhile.
	cancel()
	publishN(t, e, s, 5)

	ctx, cancel = context.WithCancel(e.ctx)
	defer cancel()
	// The original URL says after=0; Last-Event-ID wins, as a browser's
	// EventSource reconnect sends it.
	ch, _ = sse(t, ctx, r.srv.URL+"/v1/sessions/w/watch?after=0", "6")
	for want := uint64(7); want <= 15; want++ {
		ev := next(t, ch, true)
		if ev.kind != "durable" || ev.data.Seq != want {
			t.Fatalf("after reconnect, want seq %d: %+v", want, ev)
		}
	}

	// Live: a transient event following seq 15 arrives marked, with id 15;
	// one naming a future seq waits for it; a stale one is not sent.
	live, _ := logstore.LiveSubject("w")
	pubLive := func(after uint64, text string) {
		b, _ := json.Marshal(map[string]any{"afterSeq": after, "kind": "delta", "text": text})
		if err := e.nc.Publish(live, b); err != nil {
			t.Fatal(err)
		}
		e.nc.Flush()
	}
	pubLive(3, "stale")
	pubLive(16, "early")
	pubLive(15, "now")
	ev := next(t, ch, true)
	if ev.kind != "transient" || !ev.data.Transient || ev.id != "15" || *ev.data.AfterSeq != 15 || !strings.Contains(string(ev.data.Event), `"now"`) {
		t.Fatalf("transient: %+v %s", ev, ev.data.Event)
	}
	publishN(t, e, s, 1)
	ev = next(t, ch, true)
	if ev.kind != "durable" || ev.data.Seq != 16 {
		t.Fatalf("live durable: %+v", ev)
	}
	ev = next(t, ch, true)
	if ev.kind != "transient" || ev.id != "16" || !strings.Contains(string(ev.data.Event), `"early"`) {
		t.Fatalf("held transient: %+v %s", ev, ev.data.Event)
	}
	// Idle: heartbeats keep the connection open.
	if ev := next(t, ch, false); ev.kind != "ping" {
		t.Fatalf("want a ping, got %+v", ev)
	}
}

func TestWatchHugeAfterDoesNotHang(t *testing.T) {
	e := newEnv(t)
	r := e.start(t.TempDir())
	r.waitReady(t)
	publishN(t, e, loadgen.NewSession("h", t0), 3)
	for _, after := range []string{"4", "1000000", fmt.Sprint(uint64(1 << 63)), "18446744073709551615"} {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", r.srv.URL+"/v1/sessions/h/watch?after="+after, nil)
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
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, _ := sse(t, ctx, r.srv.URL+"/v1/sessions/h/watch?after=3", "")
	if ev := next(t, ch, false); ev.kind != "ping" {
		t.Fatalf("at the tail: %+v", ev)
	}
}
