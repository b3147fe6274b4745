package projector

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// TestHTTPOnMemlog runs the projector and its HTTP side on the log in
// memory (internal/memlog), as on logstore: httpapi reads the log only
// through the interface it declares (httpapi.Log). The session folded
// from the log is exported (GET /v1/sessions/{id}/export: its tail, its
// stream, then a follow of it read a page at a time), its stored
// envelopes in order, and a watch of it gets a live event published on
// the log (memlog's PublishLive, its Live).
func TestHTTPOnMemlog(t *testing.T) {
	ctx := context.Background()
	b := scripttest.Open(t, "memlog", logstore.Config{})
	if got := b.Append(t, "s", "session/created\nturn/started turn=t1\nmessage/user turn=t1 content=hello\nturn/ended turn=t1"); got != "appended seqs 1-4\n" {
		t.Fatal(got)
	}
	s, err := open(Config{DataDir: t.TempDir()}.withDefaults(), followsOf(b.Mem), httpapi.LogOf(b.Mem))
	if err != nil {
		t.Fatal(err)
	}
	defer s.db.Close()
	until := map[string]bound{}
	for _, name := range b.Mem.Streams() {
		held, err := b.Mem.LastHeldSeq(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if held > 0 {
			until[name] = bound{last: held, enough: held}
		}
	}
	if err := s.consume(ctx, until); err != nil {
		t.Fatal(err)
	}
	var sum string
	if err := s.View(func(snap store.Snapshot) error {
		got, err := snap.Summary("s")
		if err == nil && got != nil {
			sum = got.Status
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if sum == "" {
		t.Fatal("the session was not folded")
	}

	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/sessions/s/export")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if _, err := b.Mem.ReadSession(ctx, "s", 0, func(m *logstore.Msg) error {
		want.Write(m.Data)
		want.WriteByte('\n')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(want.String(), "\n"); n != 4 {
		t.Fatalf("the log holds %d events of s, want 4", n)
	}
	if resp.StatusCode != http.StatusOK || string(got) != want.String() {
		t.Fatalf("export: %s\n%s\nwant the stored envelopes:\n%s", resp.Status, got, want.String())
	}

	// A watch after the last event gets the transient events published
	// after it subscribed (it has once it says it is watching).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/sessions/s/watch?after=4", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	next := func() string {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("watch: %s: %v", resp.Status, err)
		}
		return line
	}
	for !strings.HasPrefix(next(), ": watching") {
	}
	live := `{"afterSeq":4,"type":"message/delta","data":{"text":"hel"}}`
	b.Mem.PublishLive("s", nil, []byte(live))
	var frame []string
	for line := next(); line != "\n" || len(frame) == 0; line = next() {
		if line != "\n" && !strings.HasPrefix(line, ":") {
			frame = append(frame, line)
		}
	}
	if len(frame) != 3 || frame[1] != "event: transient\n" || !strings.Contains(frame[2], live) {
		t.Fatalf("watch: the live event's frame is %q, want event transient holding %s", frame, live)
	}
}
