package logstore_test

import (
	"context"
	"testing"

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
