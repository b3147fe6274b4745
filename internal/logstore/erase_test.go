package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A log made before erasure denies message deletes, which no update can
// lift: Open keeps it (instead of failing on every start) and erase is
// refused up front.
func TestStreamThatDeniesDeletesIsKeptAndNotErasable(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	one, err := logstore.NewLayout(1)
	if err != nil {
		t.Fatal(err)
	}
	old := logstore.StreamConfig(logstore.Config{}, one, logstore.StreamName)
	old.DenyDelete = true
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	st := open(t, nc, logstore.Config{})
	if err := st.CheckErasable(ctx, "s-1"); !errors.Is(err, logstore.ErrDeletesDenied) {
		t.Fatalf("CheckErasable: %v, want ErrDeletesDenied", err)
	}

	s2 := natstest.RunServer(t)
	st2 := open(t, natstest.Connect(t, s2), logstore.Config{})
	if err := st2.CheckErasable(ctx, "s-1"); err != nil {
		t.Fatalf("a new log: %v", err)
	}
}

// TestErasedRightAfterMarkOnR3: on a 3-node cluster, a session marked
// erased through one node reads as erased at once through every other
// one. Read by Direct Get, a replica that had not yet applied the record
// answered "never erased" (a read right after an erase served its events).
func TestErasedRightAfterMarkOnR3(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	var stores []*logstore.Store
	for i := range c.Servers {
		stores = append(stores, open(t, natstest.Connect(t, c.Servers[i]), logstore.Config{Replicas: 3}))
	}
	ctx := context.Background()
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		_, err := stores[0].Writable(ctx)
		return err
	})
	for i := range 200 {
		id := fmt.Sprintf("gone-%d", i)
		if erased, err := stores[1+i%2].Erased(ctx, id); err != nil || erased {
			t.Fatalf("%s before the mark: erased %v, %v", id, erased, err)
		}
		if _, _, err := stores[0].MarkErased(ctx, logstore.Erasure{SessionID: id, By: "test", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		for _, st := range stores[1:] {
			if erased, err := st.Erased(ctx, id); err != nil || !erased {
				t.Fatalf("%s read through another node right after the mark: erased %v, %v", id, erased, err)
			}
		}
	}
}
