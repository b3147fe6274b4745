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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// storedEvent is what the stream holds, read straight from JetStream.
type storedEvent struct {
	StreamSeq uint64
	Seq       uint64 `json:"seq"`
	EventID   string `json:"eventId"`
	SessionID string `json:"sessionId"`
	Type      string `json:"type"`
}

// readStream reads every message of every session stream in stream order
// and groups the events by session.
func readStream(t *testing.T, nc *nats.Conn) (map[string][]storedEvent, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]storedEvent{}
	total := 0
	for _, name := range logstore.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := info.State.LastSeq
		if last == 0 {
			continue
		}
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		it, err := cons.Messages()
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, err := it.Next()
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			md, _ := m.Metadata()
			var e storedEvent
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatalf("stream seq %d: %v", md.Sequence.Stream, err)
			}
			e.StreamSeq = md.Sequence.Stream
			id, ok := logstore.SessionFromSubject(m.Subject())
			if !ok || id != e.SessionID {
				t.Fatalf("stream seq %d: subject %s holds session %q", e.StreamSeq, m.Subject(), e.SessionID)
			}
			out[id] = append(out[id], e)
			total++
			if md.Sequence.Stream >= last {
				break
			}
		}
		it.Stop()
	}
	return out, total
}

// loadAgent appends to one session with explicit expectedSeq and records
// what was acknowledged.
type loadAgent struct {
	id      string
	acked   []string // acked[i] = event id at seq i+1
	pending *appendReq
	err     error
}

func (a *loadAgent) run(nc *nats.Conn, stop <-chan struct{}, ackedTotal *sync.WaitGroup, count func(int)) {
	defer ackedTotal.Done()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		seq := uint64(len(a.acked))
		req := appendReq{SessionID: a.id, ExpectedSeq: u64(seq), Holder: "e2e-" + a.id}
		k := 1 + n%3 // 1, 2 and 3 event requests: plain publishes and atomic batches
		for i := 0; i < k; i++ {
			eid := fmt.Sprintf("%s-%d", a.id, seq+uint64(i)+1)
			if seq+uint64(i) == 0 {
				req.Events = append(req.Events, created(eid))
			} else {
				req.Events = append(req.Events, userMsg(eid, "hello "+eid))
			}
		}
		a.pending = &req
		r, err := request(nc, req, 2*time.Second)
		if err != nil {
			return // no answer: the outcome is unknown, resolved after the restart
		}
		if r.Error != nil {
			a.err = fmt.Errorf("%s: %s: %s", a.id, r.Error.Code, r.Error.Message)
			return
		}
		if r.FirstSeq != seq+1 || r.LastSeq != seq+uint64(k) || r.Duplicate {
			a.err = fmt.Errorf("%s: reply %+v for seqs %d..%d", a.id, r, seq+1, seq+uint64(k))
			return
		}
		for _, e := range req.Events {
			a.acked = append(a.acked, e["eventId"].(string))
		}
		a.pending = nil
		count(k)
	}
}

// TestUpKillMidLoad: `sessionlog up` as a real process takes appends from
// several clients, is killed with SIGKILL mid-load and restarted on the same
// data directory. Every acknowledged event is then stored, in order, once;
// the requests that were in flight, retried with the same event ids, answer
// committed (or duplicate) and leave no second copy; seqs are contiguous.
func TestUpKillMidLoad(t *testing.T) {
	dir := t.TempDir()
	p := startUp(t, dir, nil)
	nc := p.Connect(t)

	const agents = 8
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	as := make([]*loadAgent, agents)
	for i := range as {
		as[i] = &loadAgent{id: fmt.Sprintf("kill-%d", i)}
		wg.Add(1)
		go as[i].run(nc, stop, &wg, func(k int) { mu.Lock(); total += k; mu.Unlock() })
	}
	natstest.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if total < 600 {
			return fmt.Errorf("%d events acknowledged", total)
		}
		return nil
	})
	t0 := time.Now()
	p.Kill() // mid-load: the agents are still sending
	close(stop)
	wg.Wait()
	nc.Close()
	for _, a := range as {
		if a.err != nil {
			t.Fatalf("before the kill: %v", a.err)
		}
	}

	t.Logf("killed; agents stopped after %v", time.Since(t0))
	p2 := startUp(t, dir, nil)
	t.Logf("restarted and ready after %v", time.Since(t0))
	nc2 := p2.Connect(t)
	inflight := 0
	for _, a := range as {
		if a.pending == nil {
			continue
		}
		inflight++
		req := *a.pending
		var r appendReply
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			var err error
			if r, err = request(nc2, req, 5*time.Second); err != nil {
				return err
			}
			if r.Error != nil && (r.Error.Code == "outcome_unknown" || r.Error.Code == "not_committed") {
				return fmt.Errorf("%s: %s", r.Error.Code, r.Error.Message)
			}
			return nil
		})
		if r.Error != nil {
			t.Fatalf("%s: retry of the in-flight request: %s: %s", a.id, r.Error.Code, r.Error.Message)
		}
		if want := uint64(len(a.acked)) + 1; r.FirstSeq != want {
			t.Fatalf("%s: retry committed at seq %d, want %d", a.id, r.FirstSeq, want)
		}
		for _, e := range req.Events {
			a.acked = append(a.acked, e["eventId"].(string))
		}
	}
	t.Logf("%d events acknowledged before the kill, %d requests in flight, resolved after %v", total, inflight, time.Since(t0))

	stored, n := readStream(t, nc2)
	want := 0
	for _, a := range as {
		want += len(a.acked)
		got := stored[a.id]
		if len(got) != len(a.acked) {
			t.Errorf("%s: %d events stored, %d acknowledged", a.id, len(got), len(a.acked))
		}
		seen := map[string]bool{}
		for i, e := range got {
			if e.Seq != uint64(i+1) {
				t.Errorf("%s: event %d of the stream has seq %d", a.id, i+1, e.Seq)
			}
			if seen[e.EventID] {
				t.Errorf("%s: event %s stored twice", a.id, e.EventID)
			}
			seen[e.EventID] = true
			if i < len(a.acked) && e.EventID != a.acked[i] {
				t.Errorf("%s: seq %d holds %s, %s was acknowledged there", a.id, e.Seq, e.EventID, a.acked[i])
			}
		}
	}
	if n != want {
		t.Errorf("stream holds %d events, %d acknowledged", n, want)
	}

	t.Logf("stream checked after %v", time.Since(t0))
	// The restarted stack also passes its own verify.
	out, errOut, code := cli(t, nil, nil, "verify", "--nats-url", p2.NATSURL)
	if code != 0 {
		t.Fatalf("verify after restart: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("verified after %v", time.Since(t0))
	p2.Stop()
	t.Logf("stopped after %v", time.Since(t0))
}

// TestFlagEnvHTTPListen: SESSIONLOG_HTTP_LISTEN sets --http-listen; /readyz
// reports every check; SIGTERM stops the process cleanly (exit 0).
func TestFlagEnvHTTPListen(t *testing.T) {
	port, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := startUp(t, t.TempDir(), []string{"SESSIONLOG_HTTP_LISTEN=" + addr})
	if p.HTTPURL != "http://"+addr {
		t.Fatalf("dashboard at %s, want http://%s", p.HTTPURL, addr)
	}
	code, body, err := httpGet("http://" + addr + "/readyz")
	if err != nil || code != http.StatusOK {
		t.Fatalf("readyz: %d %q %v", code, body, err)
	}
	var rz struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(body), &rz); err != nil {
		t.Fatal(err)
	}
	if rz.Status != "ok" || rz.Checks["nats"] != "ok" || rz.Checks["writer"] != "ok" {
		t.Fatalf("readyz body %s", body)
	}
	if code, body, _ := httpGet("http://" + addr + "/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics: %d", code)
	}
	p.Stop()
	if p.waitErr != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", p.waitErr, tailText(p.stderr.String(), 20))
	}
}

// TestCLIVerbs runs ls, show, replay, verify, export and import against
// running stacks, and verify against a stream with a broken session: on
// one stream and on three partitions (cli-a and cli-b in partitions 1 and
// 0), exported from one layout and imported into the other.
func TestCLIVerbs(t *testing.T) {
	for _, tc := range []struct{ partitions, importInto int }{{1, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("P%d", tc.partitions), func(t *testing.T) { testCLIVerbs(t, tc.partitions, tc.importInto) })
	}
}

func testCLIVerbs(t *testing.T, partitions, importInto int) {
	p := startUp(t, t.TempDir(), nil, "--partitions", strconv.Itoa(partitions))
	nc := p.Connect(t)
	url := []string{"--nats-url", p.NATSURL}

	mustAppend(t, nc, appendReq{SessionID: "cli-a", ExpectedSeq: u64(0), Events: []map[string]any{created("a1"), userMsg("a2", "one")}})
	mustAppend(t, nc, appendReq{SessionID: "cli-a", ExpectedSeq: u64(2), Events: []map[string]any{userMsg("a3", "two")}})
	mustAppend(t, nc, appendReq{SessionID: "cli-a", ExpectedSeq: u64(3), Events: []map[string]any{
		{"eventId": "a4", "type": "turn/started", "turnId": "t1"},
		{"eventId": "a5", "type": "message/user", "turnId": "t1", "data": map[string]any{"content": "three"}},
	}})
	mustAppend(t, nc, appendReq{SessionID: "cli-b", ExpectedSeq: u64(0), Events: []map[string]any{created("b1"), userMsg("b2", "x")}})

	t.Run("ls", func(t *testing.T) {
		out, errOut, code := cli(t, nil, nil, append([]string{"ls"}, url...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("ls:\n%s", out)
		}
		if f := strings.Fields(lines[1]); len(f) < 4 || f[0] != "cli-a" || f[1] != "5" || f[2] != "5" || f[3] != "message/user" {
			t.Fatalf("ls line %q", lines[1])
		}
		if f := strings.Fields(lines[2]); len(f) < 4 || f[0] != "cli-b" || f[2] != "2" {
			t.Fatalf("ls line %q", lines[2])
		}
	})
	t.Run("show", func(t *testing.T) {
		out, errOut, code := cli(t, nil, nil, append([]string{"show", "cli-a"}, url...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"status    active", "last seq  5", "open turn  t1"} {
			if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		if _, _, code := cli(t, nil, nil, append([]string{"show", "nope"}, url...)...); code == 0 {
			t.Errorf("show of a missing session exited 0")
		}
	})
	t.Run("replay", func(t *testing.T) {
		out, errOut, code := cli(t, nil, nil, append([]string{"replay", "cli-a"}, url...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 {
			t.Fatalf("replay printed %d lines:\n%s", len(lines), out)
		}
		for i, l := range lines {
			var e storedEvent
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if e.Seq != uint64(i+1) || e.EventID != fmt.Sprintf("a%d", i+1) || e.SessionID != "cli-a" {
				t.Fatalf("line %d: %+v", i+1, e)
			}
		}
	})
	t.Run("verify-healthy", func(t *testing.T) {
		out, errOut, code := cli(t, nil, nil, append([]string{"verify"}, url...)...)
		if code != 0 || !strings.Contains(out, "verified 2 sessions, 7 events: 0 problems") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	})

	export := filepath.Join(t.TempDir(), "export.jsonl")
	t.Run("export-import", func(t *testing.T) {
		out, errOut, code := cli(t, nil, nil, append([]string{"export"}, url...)...)
		if code != 0 {
			t.Fatalf("export exit %d: %s", code, errOut)
		}
		if err := os.WriteFile(export, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		p2 := startUp(t, t.TempDir(), nil, "--partitions", strconv.Itoa(importInto))
		url2 := []string{"--nats-url", p2.NATSURL}
		importFile := func(path string) (string, string, int) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			return cli(t, f, nil, append([]string{"import"}, url2...)...)
		}
		if out, errOut, code := importFile(export); code != 0 || !strings.Contains(out, "imported 2 sessions, 7 events") {
			t.Fatalf("import exit %d\n%s\n%s", code, out, errOut)
		}
		for _, id := range []string{"cli-a", "cli-b"} {
			a, _, _ := cli(t, nil, nil, append([]string{"replay", id}, url...)...)
			b, _, _ := cli(t, nil, nil, append([]string{"replay", id}, url2...)...)
			if a != b || a == "" {
				t.Fatalf("%s differs after import:\n%s\n---\n%s", id, a, b)
			}
		}
		if out, errOut, code := cli(t, nil, nil, append([]string{"verify"}, url2...)...); code != 0 {
			t.Fatalf("verify of the import: exit %d\n%s\n%s", code, out, errOut)
		}
		// The same file again: everything is present, nothing is written.
		if out, errOut, code := importFile(export); code != 0 || !strings.Contains(out, "imported 0 sessions, 0 events (2 sessions already present)") {
			t.Fatalf("second import exit %d\n%s\n%s", code, out, errOut)
		}
		// A file whose cli-a differs from what is stored is refused whole.
		changed := filepath.Join(t.TempDir(), "changed.jsonl")
		b, _ := os.ReadFile(export)
		newer := strings.Replace(string(b), `"eventId":"a2"`, `"eventId":"zz"`, 1) + fmt.Sprintf(`{"schemaVersion":1,"sessionId":"cli-c","seq":1,"eventId":"c1","time":%q,"type":"session/created","ignorable":false,"synthetic":false,"data":{}}`+"\n", time.Now().UTC().Format(time.RFC3339Nano))
		if newer == string(b) {
			t.Fatal("export has no event a2")
		}
		if err := os.WriteFile(changed, []byte(newer), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := importFile(changed); code == 0 || !strings.Contains(errOut, "exists with different events") {
			t.Fatalf("import over a different session: exit %d\n%s\n%s", code, out, errOut)
		}
		if out, _, _ := cli(t, nil, nil, append([]string{"ls"}, url2...)...); strings.Contains(out, "cli-c") {
			t.Fatalf("a refused import wrote cli-c:\n%s", out)
		}
	})

	t.Run("verify-broken", func(t *testing.T) {
		// Straight to the stream, past the writer: seq 4 after seq 2.
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		layout, _ := logstore.NewLayout(partitions)
		loc, _ := layout.Locate("cli-b")
		if out, errOut, code := cli(t, nil, nil, append([]string{"locate", "cli-b"}, url...)...); code != 0 || !strings.Contains(out, "subject "+loc.Subject+" ") {
			t.Fatalf("locate cli-b: exit %d, %q %s, want %s", code, out, errOut, loc.Subject)
		}
		body := fmt.Sprintf(`{"schemaVersion":1,"sessionId":"cli-b","seq":4,"eventId":"b4","time":%q,"type":"message/user","ignorable":false,"synthetic":false,"data":{"content":"skipped"}}`, time.Now().UTC().Format(time.RFC3339Nano))
		msg := nats.NewMsg(loc.Subject)
		msg.Data = []byte(body)
		msg.Header.Set(logstore.HeaderSeq, "4")
		msg.Header.Set(logstore.HeaderType, "message/user")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := cli(t, nil, nil, append([]string{"verify"}, url...)...)
		if code == 0 {
			t.Fatalf("verify exited 0 on a gap:\n%s", out)
		}
		if !strings.Contains(out, "PROBLEM session=cli-b seq=4") || !strings.Contains(out, "kind=gap") || strings.Contains(out, "session=cli-a") {
			t.Fatalf("verify output:\n%s\n%s", out, errOut)
		}
		// --session narrows it: the healthy session alone passes.
		if out, _, code := cli(t, nil, nil, append([]string{"verify", "--session", "cli-a"}, url...)...); code != 0 {
			t.Fatalf("verify --session cli-a: exit %d\n%s", code, out)
		}
	})

	t.Run("tail", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := execTail(ctx, t, append([]string{"tail", "cli-a", "--after", "3"}, url...)...)
		sc := bufio.NewScanner(cmd.stdout)
		var got []string
		for len(got) < 3 && sc.Scan() {
			got = append(got, sc.Text())
			if len(got) == 2 {
				// Now a new durable event and a transient one arrive live.
				mustAppend(t, nc, appendReq{SessionID: "cli-a", ExpectedSeq: u64(5), Events: []map[string]any{
					{"eventId": "a6", "type": "message/user", "turnId": "t1", "data": map[string]any{"content": "four"}},
				}})
			}
		}
		if len(got) < 3 {
			t.Fatalf("tail printed %q", got)
		}
		for i, want := range []string{`"eventId":"a4"`, `"eventId":"a5"`, `"eventId":"a6"`} {
			if !strings.Contains(got[i], want) {
				t.Fatalf("tail line %d = %s, want %s", i+1, got[i], want)
			}
		}
		if err := nc.Publish("sessions.live.cli-a", []byte(`{"afterSeq":6,"delta":"tok"}`)); err != nil {
			t.Fatal(err)
		}
		if !sc.Scan() || !strings.Contains(sc.Text(), `"transient":true`) || !strings.Contains(sc.Text(), `"delta":"tok"`) {
			t.Fatalf("tail transient line %q", sc.Text())
		}
		cmd.stop(t)
	})
}
