package perms

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
)

// TestAgentExportMemoryIsBounded exports, as alice of acme (TestTenants'
// deployment), a session of 10,000 events and one of 100,000 through the
// read API, and measures the peak resident memory of each export: the
// second writes ten times the bytes of the first in about the memory of
// the first (readTwice holds a page of the session, never the session).
func TestAgentExportMemoryIsBounded(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	alice := users["alice"]
	ac := connect(t, s.natsURL, alice, nats.CustomInboxPrefix(natsauth.InboxPrefix("alice")))
	const small, large = 10_000, 100_000
	bigSession(t, ac, "s-small", small, 200)
	bigSession(t, ac, "s-large", large, 200)
	export := func(id string) (written int64, maxRSS int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, sessionlogBin(t), "export", "--session", id, "--nats-url", s.natsURL, "--nats-user", alice.user, "--nats-password", alice.password)
		cmd.Env = environ()
		var out countWriter
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("alice's export of %s: %v\n%s", id, err, errb.String())
		}
		if want := fmt.Sprintf("exported 1 sessions, %d events", map[string]int{"s-small": small, "s-large": large}[id]); !bytes.Contains(errb.Bytes(), []byte(want)) {
			t.Fatalf("alice's export of %s does not say %q:\n%s", id, want, errb.String())
		}
		// Linux gives the peak resident set size in KiB.
		return out.n, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	smallBytes, smallRSS := export("s-small")
	largeBytes, largeRSS := export("s-large")
	t.Logf("export of %d events: %d bytes written, peak RSS %d KiB; of %d events: %d bytes written, peak RSS %d KiB",
		small, smallBytes, smallRSS>>10, large, largeBytes, largeRSS>>10)
	// The large session's bytes beyond the small one's are not held: a
	// quarter of them is far more than what the pages of a read and the
	// collector's slack take.
	if grew := largeRSS - smallRSS; grew > (largeBytes-smallBytes)/4 {
		t.Errorf("the export of %d more bytes took %d KiB more memory (%d KiB against %d KiB)", largeBytes-smallBytes, grew>>10, largeRSS>>10, smallRSS>>10)
	}
}

// countWriter counts the bytes written to it and keeps none.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
