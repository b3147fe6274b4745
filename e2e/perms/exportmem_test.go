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

// TestExportMemoryIsBounded exports a session of 10,000 events and one of
// 100,000, as alice of acme (TestTenants' deployment), through the read
// API, and as the operator, from the store, and measures the peak
// resident memory of each export: the second writes ten times the bytes
// of the first in about the memory of the first (each session is read
// twice, a page or a batch at a time, never held whole).
func TestExportMemoryIsBounded(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	alice := users["alice"]
	ac := connect(t, s.natsURL, alice, nats.CustomInboxPrefix(natsauth.InboxPrefix("alice")))
	const small, large = 10_000, 100_000
	bigSession(t, ac, "s-small", small, 200)
	bigSession(t, ac, "s-large", large, 200)
	events := map[string]int{"s-small": small, "s-large": large}
	export := func(who creds, id, prefix string) (written int64, maxRSS int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, sessionlogBin(t), "export", "--session", prefix+id, "--nats-url", s.natsURL, "--nats-user", who.user, "--nats-password", who.password)
		cmd.Env = environ()
		var out countWriter
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s's export of %s: %v\n%s", who.user, id, err, errb.String())
		}
		if want := fmt.Sprintf("exported 1 sessions, %d events", events[id]); !bytes.Contains(errb.Bytes(), []byte(want)) {
			t.Fatalf("%s's export of %s does not say %q:\n%s", who.user, id, want, errb.String())
		}
		// Linux gives the peak resident set size in KiB.
		return out.n, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	for _, tc := range []struct {
		who    creds
		prefix string // of the id the user names
	}{{alice, ""}, {creds{"operator", deployPasswords["OPERATOR"]}, "_Tacme_"}} {
		smallBytes, smallRSS := export(tc.who, "s-small", tc.prefix)
		largeBytes, largeRSS := export(tc.who, "s-large", tc.prefix)
		t.Logf("%s's export of %d events: %d bytes written, peak RSS %d KiB; of %d events: %d bytes written, peak RSS %d KiB",
			tc.who.user, small, smallBytes, smallRSS>>10, large, largeBytes, largeRSS>>10)
		// The large session's bytes beyond the small one's are not held:
		// half of them (some 18 MB) is far more than what the pages of a
		// read through the read API, or the 8 MiB a read of the store
		// fetches ahead, and the collector's slack take.
		if grew := largeRSS - smallRSS; grew > (largeBytes-smallBytes)/2 {
			t.Errorf("%s's export of %d more bytes took %d KiB more memory (%d KiB against %d KiB)", tc.who.user, largeBytes-smallBytes, grew>>10, largeRSS>>10, smallRSS>>10)
		}
	}
}

// countWriter counts the bytes written to it and keeps none.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
