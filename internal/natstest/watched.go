package natstest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ViolationWait is how long WantViolation waits for the server's answer.
const ViolationWait = 3 * time.Second

// Watched is a connection whose asynchronous errors (the server's
// permission violations among them) are collected, for tests of what a
// user may and may not do.
type Watched struct {
	*nats.Conn
	errs chan error
}

// ConnectWatched connects to url with opts (after its own: subscribe
// permission errors reported, async errors collected).
func ConnectWatched(t TB, url string, opts ...nats.Option) *Watched {
	t.Helper()
	w := &Watched{errs: make(chan error, 256)}
	opts = append([]nats.Option{
		nats.PermissionErrOnSubscribe(true),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case w.errs <- err:
			default:
			}
		}),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	w.Conn = nc
	return w
}

// WantViolation waits for the server's permission violation for op
// ("publish", "subscription") on subject.
func (w *Watched) WantViolation(t TB, op, subject string) {
	t.Helper()
	want := fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
	deadline := time.After(ViolationWait)
	var other []string
	for {
		select {
		case err := <-w.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
				return
			}
			other = append(other, err.Error())
		case <-deadline:
			t.Fatalf("no %q (other async errors: %v)", want, other)
		}
	}
}

// NoViolation: nothing the connection did so far was refused.
func (w *Watched) NoViolation(t TB) {
	t.Helper()
	if err := w.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	select {
	case err := <-w.errs:
		t.Fatalf("unexpected async error: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}
