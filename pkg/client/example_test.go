package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// An agent's turn, each checkpoint durable before the step it guards:
// against a running `sessionlog up` (nats://127.0.0.1:4222). The holder
// names this agent process (1 to 128 of [A-Za-z0-9_.:-]).
func Example() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc)

	s, err := c.Create(ctx, "demo-1", "vm-7:agent-1", schema.SessionCreated{Title: "hello"})
	if err != nil {
		log.Fatal(err) // a session "demo-1" exists already: client.Open it instead
	}
	if _, err := s.StartTurn(ctx, nil); err != nil {
		log.Fatal(err)
	}
	if err := s.UserMessage(ctx, json.RawMessage(`"list the files"`)); err != nil {
		log.Fatal(err)
	}
	// attempt/started is stored before the model is called.
	reply, err := s.RunAttempt(ctx, "some-model", func(ctx context.Context, attemptID string) (json.RawMessage, json.RawMessage, error) {
		return json.RawMessage(`[{"type":"text","text":"I will run ls."}]`), nil, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	// tool/started is stored before the side effect; a crash after it is
	// closed as outcome_unknown by the repairer, never retried blindly.
	out, err := s.RunTool(ctx, client.ToolCall{Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		func(ctx context.Context) (json.RawMessage, error) { return json.RawMessage(`"README.md"`), nil })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	if err := s.EndTurn(ctx, schema.TurnCompleted); err != nil {
		log.Fatal(err)
	}
	fmt.Println("last seq", s.LastSeq())
	// With `sessionlog up` running, this prints:
	//   [{"type":"text","text":"I will run ls."}]
	//   "README.md"
	//   last seq 9
}

// Reopening a session after a crash: Open reads its events through
// sessions.api.read and folds them; what the crashed process left open is
// in the state (or already closed by the repairer).
func ExampleClient_Open() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	s, err := client.New(nc).Open(ctx, "demo-1", "vm-7:agent-1")
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range s.State().OpenWork() {
		fmt.Println("open:", w.Kind, w.ID)
	}
}

// An agent of a tenant (user alice of a tenant account, DESIGN.md section
// 2) connects with its own inbox prefix, the only one its user may
// subscribe to, and checks it before its first request. Its session
// "demo-2" is stored as _T<tenant>_demo-2, its alone.
func ExampleCheckInbox() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222",
		nats.UserInfo("alice", "alice's password"), nats.CustomInboxPrefix("_INBOX.alice"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	if err := client.CheckInbox(ctx, nc); err != nil {
		log.Fatal(err) // errors.Is(err, client.ErrInboxRefused): another prefix
	}
	s, err := client.New(nc).Create(ctx, "demo-2", "vm-7:alice-1", schema.SessionCreated{Title: "alice's"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("last seq", s.LastSeq())
}
