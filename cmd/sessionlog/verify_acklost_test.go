package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// `sessionlog verify` keeps what nats-server says it lost (making
// SESSION_LOST when the deployment has no such bucket yet) and reports it
// after the server restarted, until `verify --ack-lost` acknowledges it.
func TestVerifyAckLost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var s *server.Server
	start := func() string {
		t.Helper()
		var err error
		if s, err = natstest.Start(natstest.Options(dir)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		return s.ClientURL()
	}
	stop := func() { s.Shutdown(); s.WaitForShutdown() }
	url := start()
	nc := natstest.Connect(t, s)
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g := gen.NewSession("s1", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	for range 3 {
		if _, err := gen.Publish(ctx, st, g.Next()); err != nil {
			t.Fatal(err)
		}
	}
	// A deployment older than the bucket.
	if err := natstest.JetStream(t, nc).DeleteStream(ctx, "KV_"+logstore.LostBucket); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	stop()
	blks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", logstore.StreamName, "msgs", "*.blk"))
	if err != nil || len(blks) != 1 {
		t.Fatalf("block files %v (%v)", blks, err)
	}
	if err := os.Remove(blks[0]); err != nil {
		t.Fatal(err)
	}
	url = start()
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"verify", "--nats-url", url}, args...), &out, &errb)
		return code, out.String()
	}
	const want = "PROBLEM stream=" + logstore.StreamName + " kind=server_lost: nats-server lost 3 stored messages (seqs 1, 2, 3;"
	if code, out := run(); code == 0 || !strings.Contains(out, want) {
		t.Fatalf("verify after the loss: exit %d\n%s\nwant %q", code, out, want)
	}
	stop()
	url = start()
	code, out := run("--ack-lost")
	t.Logf("verify --ack-lost after a restart: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, want) || !strings.Contains(out, "ACKED stream="+logstore.StreamName+" key="+logstore.StreamName+".") {
		t.Fatalf("verify --ack-lost after a restart: exit %d, want the loss reported and acknowledged", code)
	}
	if code, out := run(); code != 0 || strings.Contains(out, "PROBLEM") {
		t.Fatalf("verify after the ack: exit %d\n%s", code, out)
	}
}
