// Command testagent is a child process for the repair end-to-end tests,
// killed with SIGKILL where a crash is the point.
//
//	testagent agent -nats-url URL -session ID -holder H -ttl D
//
// uses pkg/client to create the session, start a turn and run tool call
// c1 through Session.RunTool, which makes tool/started durable before the
// side effect begins. The side effect prints "STARTED <turnId> c1 <seq>"
// and runs until the process is killed; meanwhile the agent heartbeats
// every ttl/3.
//
//	testagent repairer -nats-url URL -ttl D -grace D [-concurrency N]
//
// runs the repairer service until killed, printing "READY" once it serves.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testagent agent|repairer [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "agent":
		err = runAgent(os.Args[2:])
	case "repairer":
		err = runRepairer(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(1)
	}
}

func runAgent(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	url := fs.String("nats-url", nats.DefaultURL, "")
	id := fs.String("session", "", "")
	holder := fs.String("holder", "testagent", "")
	ttl := fs.Duration("ttl", 30*time.Second, "lease TTL (heartbeat every third)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx := context.Background()
	s, err := client.New(nc).Create(ctx, *id, *holder, schema.SessionCreated{Agent: "testagent"})
	if err != nil {
		return err
	}
	turn, err := s.StartTurn(ctx, nil)
	if err != nil {
		return err
	}
	go func() {
		for {
			if _, err := s.Heartbeat(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "testagent: heartbeat:", err)
			}
			time.Sleep(*ttl / 3)
		}
	}()
	// RunTool makes tool/started durable before the side effect runs; the
	// "side effect" announces itself and runs until the process is killed.
	_, err = s.RunTool(ctx, client.ToolCall{ID: "c1", Name: "sh", Input: json.RawMessage(`{"cmd":"deploy"}`)},
		func(ctx context.Context) (json.RawMessage, error) {
			fmt.Printf("STARTED %s c1 %d\n", turn, s.LastSeq())
			select {}
		})
	return err
}

func runRepairer(args []string) error {
	fs := flag.NewFlagSet("repairer", flag.ContinueOnError)
	url := fs.String("nats-url", nats.DefaultURL, "")
	ttl := fs.Duration("ttl", 30*time.Second, "")
	replicas := fs.Int("replicas", 1, "replicas of the store's streams and buckets")
	cfg := assemble.DefaultRepairer()
	fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "")
	fs.DurationVar(&cfg.SweepInterval, "sweep", cfg.SweepInterval, "")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := logstore.Open(ctx, nc, logstore.Config{LeaseTTL: *ttl, Replicas: *replicas, Logger: log})
	if err != nil {
		return err
	}
	cfg.LeaseTTL = *ttl
	svc, err := assemble.NewRepairer(cfg, st, assemble.Deps{Conn: nc, Logger: log})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for svc.Ready() != nil {
		select {
		case err := <-done:
			return errors.Join(errors.New("repairer stopped"), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Println("READY")
	return <-done
}
