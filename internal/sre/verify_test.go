package sre

import (
	"bytes"
	"context"
	"errors"
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

// verify names what nats-server lost of a stream when it recovered its
// files, though every session's chain is whole: two sessions of three
// events, the block file cut 30 bytes short of its end while the server
// was down (inside the last record: the server drops it, keeps the
// stream's last sequence and says it dropped the 358 bytes left of the
// record). Session "late"
// now ends at its seq 2 with its chain whole; before the server's record
// was read, verify found nothing.
func TestVerifyServerLost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := runServer(t, dir)
	st := openStore(t, s)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, id := range []string{"early", "late"} {
		g := gen.NewSession(id, t0)
		for range 3 {
			if _, err := gen.Publish(ctx, st, g.Next()); err != nil {
				t.Fatal(err)
			}
		}
	}
	verify := func(st *logstore.Store) (string, error) {
		var out, errb bytes.Buffer
		err := Verify(ctx, st, "", false, "", "", &out, &errb)
		return out.String(), err
	}
	if out, err := verify(st); err != nil {
		t.Fatalf("verify before the damage: %v\n%s", err, out)
	}
	s.Shutdown()
	s.WaitForShutdown()
	blks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", logstore.StreamName, "msgs", "*.blk"))
	if err != nil || len(blks) != 1 {
		t.Fatalf("block files %v (%v)", blks, err)
	}
	fi, err := os.Stat(blks[0])
	if err == nil {
		err = os.Truncate(blks[0], fi.Size()-30)
	}
	if err != nil {
		t.Fatal(err)
	}
	st = openStore(t, runServer(t, dir))
	out, err := verify(st)
	t.Logf("verify after the damage:\n%s", out)
	want := "PROBLEM stream=" + logstore.StreamName + " kind=server_lost: nats-server dropped "
	if !errors.Is(err, ErrSilent) || !strings.Contains(out, want) || !strings.Contains(out, " bytes of damaged records when it recovered its files") {
		t.Fatalf("verify after the damage: %v, want ErrSilent and %q… bytes of damaged records", err, want)
	}
	if strings.Contains(out, "session=") {
		t.Errorf("a session's problem: the chains are whole")
	}

	// The server forgets its record when it restarts; verify kept it
	// (SESSION_LOST), and reports it after two more restarts, until
	// --ack-lost acknowledges it.
	for range 2 {
		s.Shutdown()
		s.WaitForShutdown()
		s = runServer(t, dir)
	}
	st = openStore(t, s)
	if ld, err := st.ServerLost(ctx, logstore.StreamName); err != nil || ld != nil {
		t.Fatalf("the server's record after two restarts: %+v (%v), want it forgotten", ld, err)
	}
	out, err = verify(st)
	t.Logf("verify after two more restarts:\n%s", out)
	if !errors.Is(err, ErrSilent) || !strings.Contains(out, want) {
		t.Fatalf("verify after two more restarts: %v, want ErrSilent and %q", err, want)
	}
	var acked bytes.Buffer
	if err := AckLost(ctx, st, false, &acked); err != nil {
		t.Fatal(err)
	}
	t.Logf("ack:\n%s", acked.String())
	if n := strings.Count(acked.String(), "ACKED stream="+logstore.StreamName+" "); n != 1 {
		t.Errorf("acknowledged %d records, want 1:\n%s", n, acked.String())
	}
	if out, err := verify(st); err != nil {
		t.Fatalf("verify after the ack: %v\n%s", err, out)
	}
}

func runServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	s, err := natstest.Start(natstest.Options(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func openStore(t *testing.T, s *server.Server) *logstore.Store {
	t.Helper()
	st, err := logstore.Open(context.Background(), natstest.Connect(t, s), logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
