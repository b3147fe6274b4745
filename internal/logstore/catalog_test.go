package logstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

func TestListSessionsAndLastStored(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if got, err := st.ListSessions(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty log: %+v, %v", got, err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "b", Events: events("b", 1, 3, "e")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "a", Events: events("a", 1, 1, "e")}); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []logstore.SessionCount{{Stream: logstore.StreamName, ID: "a", Messages: 1}, {Stream: logstore.StreamName, ID: "b", Messages: 3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ListSessions = %+v, want %+v", got, want)
	}
	last, err := st.LastStoredOf(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if last.Header.Get(logstore.HeaderSeq) != "3" || last.StreamSeq != 3 || last.Stored.IsZero() || len(last.Data) == 0 {
		t.Fatalf("LastStoredOf(b) = %+v", last)
	}
	if _, err := st.LastStoredOf(ctx, "none"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("LastStoredOf(none) = %v, want ErrMsgNotFound", err)
	}
}

func TestProvisionedReplicas(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	if got := logstore.ProvisionedReplicas(ctx, nc, 1); len(got) != 0 {
		t.Fatalf("before provisioning: %v", got)
	}
	open(t, nc, logstore.Config{Replicas: 1})
	if got := logstore.ProvisionedReplicas(ctx, nc, 1); got[logstore.StreamName] != 1 {
		t.Fatalf("after provisioning: %v", got)
	}
}
