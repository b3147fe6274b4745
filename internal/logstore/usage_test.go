package logstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// An erased session's give-back lands once however often it is repeated
// until it is forgotten, and the writers' counts added meanwhile keep the
// session's name in the tenant's value.
func TestGiveBackErasedOnce(t *testing.T) {
	ctx := context.Background()
	st := open(t, natstest.Connect(t, natstest.RunServer(t)), logstore.Config{})
	if _, _, err := st.AddUsage(ctx, "acme", logstore.TenantUsage{Sessions: 5, Bytes: 5000}, nil); err != nil {
		t.Fatal(err)
	}
	back := logstore.TenantUsage{Sessions: -1, Bytes: -1000}
	if given, err := st.GiveBackErased(ctx, "_Tacme_a", back); err != nil || !given {
		t.Fatalf("first give-back: %v %v, want given", given, err)
	}
	if _, _, err := st.AddUsage(ctx, "acme", logstore.TenantUsage{Bytes: 10}, nil); err != nil {
		t.Fatal(err)
	}
	if given, err := st.GiveBackErased(ctx, "_Tacme_a", back); err != nil || given {
		t.Fatalf("repeated give-back: %v %v, want not given", given, err)
	}
	if given, err := st.GiveBackErased(ctx, "_Tacme_b", back); err != nil || !given {
		t.Fatalf("another session's give-back: %v %v, want given", given, err)
	}
	want := logstore.TenantUsage{Sessions: 3, Bytes: 3010}
	if got, err := st.UsageOf(ctx, "acme"); err != nil || got != want {
		t.Fatalf("usage %+v (%v), want %+v", got, err, want)
	}
	for range 2 {
		if err := st.ForgetGiveBack(ctx, "_Tacme_a"); err != nil {
			t.Fatal(err)
		}
	}
	// Forgotten (its job is past its give-back): a new give-back of the
	// id lands, as a session of that id stored again and erased would.
	if given, err := st.GiveBackErased(ctx, "_Tacme_a", back); err != nil || !given {
		t.Fatalf("give-back after forgetting: %v %v, want given", given, err)
	}
	want = logstore.TenantUsage{Sessions: 2, Bytes: 2010}
	if got, err := st.UsageOf(ctx, "acme"); err != nil || got != want {
		t.Fatalf("usage %+v (%v), want %+v", got, err, want)
	}
}

// A counter made Deferred holds its counts for Run from the start (Local
// shows them, the bucket does not have them); a tenant's count past
// FlushBytes is added before the interval (an hour here) comes, Added
// reports the bucket's value after it, and Local no longer holds it.
func TestUsageCounterFlushesPastBytes(t *testing.T) {
	ctx := context.Background()
	st := open(t, natstest.Connect(t, natstest.RunServer(t)), logstore.Config{})
	type added struct {
		tenant string
		after  logstore.TenantUsage
	}
	got := make(chan added, 10)
	c := logstore.NewUsageCounterWith(st, logstore.UsageCounterOptions{Every: time.Hour, FlushBytes: 1000, Deferred: true,
		Added: func(tenant string, after logstore.TenantUsage, _ uint64) { got <- added{tenant, after} }})
	c.Count("acme", logstore.TenantUsage{Sessions: 1, Bytes: 600})
	if l := c.Local("acme"); l != (logstore.TenantUsage{Sessions: 1, Bytes: 600}) {
		t.Fatalf("local %+v, want the count", l)
	}
	if u, err := st.UsageOf(ctx, "acme"); err != nil || u != (logstore.TenantUsage{}) {
		t.Fatalf("the bucket holds %+v (%v) before any flush, want nothing", u, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	c.Count("acme", logstore.TenantUsage{Bytes: 500})
	want := logstore.TenantUsage{Sessions: 1, Bytes: 1100}
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if u, err := st.UsageOf(ctx, "acme"); err != nil || u != want {
			return fmt.Errorf("the bucket holds %+v (%v), want %+v", u, err, want)
		}
		return nil
	})
	if a := <-got; a.tenant != "acme" || a.after != want {
		t.Fatalf("added %+v, want acme %+v", a, want)
	}
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if l := c.Local("acme"); l != (logstore.TenantUsage{}) {
			return fmt.Errorf("local %+v after the flush", l)
		}
		return nil
	})
}
