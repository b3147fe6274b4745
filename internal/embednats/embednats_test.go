package embednats

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/transcripttest"
)

// A server started with JetStream accepts clients and has JetStream up
// when Start returns, and its logs reach the slog logger.
func TestStartJetStream(t *testing.T) {
	var logs transcripttest.Output
	ns, err := Start(natstest.Options(t.TempDir()), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.JetStreamEnabled() {
		t.Fatal("JetStream is not enabled")
	}
	nc := natstest.Connect(t, ns)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "Server is ready") {
		t.Errorf("the server's logs did not reach slog:\n%s", logs.String())
	}
}

// A port another process holds is an error from Start that names the
// listen failure, as soon as the server reports it, and the process goes
// on (the server's fatal log does not exit it).
func TestStartPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	opts := natstest.Options(t.TempDir())
	opts.Port = ln.Addr().(*net.TCPAddr).Port
	var logs transcripttest.Output
	ns, err := Start(opts, slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil {
		ns.Shutdown()
		t.Fatal("Start on a taken port succeeded")
	}
	if !strings.HasPrefix(err.Error(), "nats-server: Error listening on port") {
		t.Errorf("error %q, want the server's listen failure", err)
	}
	if !strings.Contains(logs.String(), "fatal=true") {
		t.Errorf("the fatal log did not reach slog:\n%s", logs.String())
	}
}
