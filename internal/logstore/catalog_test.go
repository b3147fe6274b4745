package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
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

// EachLastStored gives every session of every stream once, its last
// message's headers and stored time, a page at a time: 2,500 sessions over
// two partitions are more than two pages of the walk.
func TestEachLastStored(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{Partitions: 2})
	ctx := context.Background()
	const sessions = 2500
	want := map[string]uint64{}
	var all []schema.Envelope
	for i := range sessions {
		id := fmt.Sprintf("s%04d", i)
		n := 1 + i%3
		all = append(all, events(id, 1, n, "e")...)
		want[id] = uint64(n)
	}
	if _, err := st.PublishUnchecked(ctx, slices.Values(all)); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	err := st.EachLastStored(ctx, func(id string, m *logstore.Msg) error {
		if _, dup := got[id]; dup {
			t.Errorf("%s given twice", id)
		}
		seq, _ := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
		got[id] = seq
		if m.Stored.IsZero() || len(m.Data) != 0 {
			t.Errorf("%s: stored %v, %d bytes of body (want a time, headers only)", id, m.Stored, len(m.Data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%d sessions given, want %d (first differences: %v)", len(got), len(want), firstDiff(got, want))
	}
	// fn's error ends the walk.
	stop := errors.New("stop")
	n := 0
	if err := st.EachLastStored(ctx, func(string, *logstore.Msg) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("an error from fn: %v after %d calls", err, n)
	}
}

func firstDiff(got, want map[string]uint64) []string {
	var out []string
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			out = append(out, fmt.Sprintf("%s: %d want %d", id, g, w))
			if len(out) == 3 {
				break
			}
		}
	}
	return out
}
