package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// Two recounts at once: the second, started while the first walks, is
// refused ErrRecountRunning and corrects nothing, so the first's
// correction lands once; the lock is gone after it, and a lock whose
// lease ran out (a recount killed) is taken over.
func TestRecountOneAtATime(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, natstest.Connect(t, natstest.RunServer(t)), Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]TenantUsage{}
	for _, sid := range []string{"_Tacme_a", "_Tacme_b", "s-1"} {
		r, err := st.Append(ctx, AppendRequest{SessionID: sid, Events: EventsForTest(sid, 1, 3, "e")})
		if err != nil {
			t.Fatal(err)
		}
		u := want[UsageTenant(sid)]
		u.Sessions++
		u.Bytes += int64(r.Bytes)
		want[UsageTenant(sid)] = u
	}
	// The bucket is wrong: a recount must correct it.
	if _, _, err := st.AddUsage(ctx, "acme", TenantUsage{Sessions: 7, Bytes: 1}, nil); err != nil {
		t.Fatal(err)
	}
	var second error
	recountWalked = func() {
		recountWalked = nil
		_, second = st.RecountUsage(ctx)
	}
	t.Cleanup(func() { recountWalked = nil })
	if _, err := st.RecountUsage(ctx); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for tenant, w := range want {
			if got, err := st.UsageOf(ctx, tenant); err != nil || got != w {
				t.Fatalf("%s: usage %+v (%v), the streams hold %+v", tenant, got, err, w)
			}
		}
	}
	check()
	if !errors.Is(second, ErrRecountRunning) {
		t.Fatalf("a recount during another answered %v, want ErrRecountRunning", second)
	}
	kv, err := st.usageKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, recountKey); err == nil {
		t.Fatal("the recount lock is left after the recount")
	}
	// A lock left by a recount killed, its lease run out.
	b, _ := json.Marshal(recountLock{Holder: "killed", Started: time.Now().Add(-time.Hour), Until: time.Now().Add(-time.Minute)})
	if _, err := kv.Put(ctx, recountKey, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddUsage(ctx, "acme", TenantUsage{Bytes: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecountUsage(ctx); err != nil {
		t.Fatalf("a recount after a lock run out: %v", err)
	}
	check()
}
