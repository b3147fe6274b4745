package logstore_test

import (
	"context"
	"errors"
	"testing"

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
