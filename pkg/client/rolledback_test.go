package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The log loses the last event acknowledged to the client (deleted behind
// its back, as a node restored from an older copy would): the client's
// next append, with or without an expectation, and its next read answer
// rolled_back, never a conflict or an unknown outcome to retry. Another
// client, which was acknowledged nothing, appends as usual.
func TestRolledBackClient(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	js := natstest.JetStream(t, s.nc)
	for _, expect := range []bool{false, true} {
		sid := map[bool]string{false: "rb-tail", true: "rb-expected"}[expect]
		c := client.New(s.nc)
		loseThird(t, c, js, sid)
		if _, err := c.Read(ctx, api.ReadRequest{SessionID: sid}); !errors.Is(err, client.ErrRolledBack) {
			t.Fatalf("read: %v, want rolled_back", err)
		}
		req := client.AppendRequest{SessionID: sid, Events: []schema.Envelope{msg("three")}}
		if expect {
			req.ExpectedSeq = client.Seq(3)
		}
		_, err := c.Append(ctx, req)
		if !errors.Is(err, client.ErrRolledBack) || client.CodeOf(err) != schema.CodeRolledBack {
			t.Fatalf("append after the loss: %v, want rolled_back", err)
		}
		t.Log(err)
		// A client that was acknowledged nothing of the session sees a
		// session of the seqs it holds.
		if _, err := client.New(s.nc).Append(ctx, client.AppendRequest{SessionID: sid, Events: []schema.Envelope{msg("four")}}); err != nil {
			t.Fatalf("another client: %v", err)
		}
	}
}

// The log loses the last event acknowledged to a client and another
// client's append takes its seq: the log is not shorter, but the event at
// that seq is another one. The first client's read answers rolled_back,
// by the chain hash acknowledged to it.
func TestRolledBackClientReadsAnotherEvent(t *testing.T) {
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	ctx := context.Background()
	js := natstest.JetStream(t, s.nc)
	c := client.New(s.nc)
	loseThird(t, c, js, "rb-other")
	other, err := client.New(s.nc).Append(ctx, client.AppendRequest{SessionID: "rb-other", Events: []schema.Envelope{msg("another two")}})
	if err != nil || other.LastSeq != 3 {
		t.Fatalf("another client's append: %+v %v", other, err)
	}
	for _, after := range []uint64{0, 2} {
		_, err = c.Read(ctx, api.ReadRequest{SessionID: "rb-other", AfterSeq: after})
		if !errors.Is(err, client.ErrRolledBack) {
			t.Fatalf("read after %d: %v, want rolled_back", after, err)
		}
	}
	t.Log(err)
	// A page that does not reach the seq says nothing of it.
	if _, err := c.Read(ctx, api.ReadRequest{SessionID: "rb-other", AfterSeq: 3}); err != nil {
		t.Fatalf("read after 3: %v", err)
	}
	if _, err := client.Load(ctx, c, "rb-other"); !errors.Is(err, client.ErrRolledBack) {
		t.Fatalf("load: %v, want rolled_back", err)
	}
}

// loseThird appends three events to sid through c, then deletes the third
// behind the client's back, as a node restored from an older copy would
// have lost it.
func loseThird(t *testing.T, c *client.Client, js jetstream.JetStream, sid string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Append(ctx, client.AppendRequest{SessionID: sid, Events: []schema.Envelope{created(), msg("one")}}); err != nil {
		t.Fatal(err)
	}
	last, err := c.Append(ctx, client.AppendRequest{SessionID: sid, Events: []schema.Envelope{msg("two")}})
	if err != nil || last.LastSeq != 3 {
		t.Fatalf("append: %+v %v", last, err)
	}
	stream, err := js.Stream(ctx, "SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, last.StreamSeq); err != nil {
		t.Fatal(err)
	}
}
