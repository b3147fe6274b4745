// Command testagent is a child process for the repair end-to-end tests,
// killed with SIGKILL where a crash is the point.
//
//	testagent agent -nats-url URL -session ID -holder H -ttl D
//
// appends session/created, turn/started, tool/requested and tool/started
// through the writer (sessions.api.append, naming the holder), prints
// "STARTED <seq>" once tool/started is durable (the point after which the
// side effect would begin) and then heartbeats every ttl/3 forever, as an
// agent whose tool is running.
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

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/repairer"
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

type appendReq struct {
	SessionID   string            `json:"sessionId"`
	ExpectedSeq *uint64           `json:"expectedSeq,omitempty"`
	Holder      string            `json:"holder,omitempty"`
	Events      []schema.Envelope `json:"events"`
}

type appendReply struct {
	LastSeq uint64 `json:"lastSeq"`
	Error   *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
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
	n := 0
	send := func(e schema.Envelope) (uint64, error) {
		n++
		// Client-chosen ids make a retried request deduplicate.
		e.EventID = fmt.Sprintf("%s-ev%d", *holder, n)
		b, _ := json.Marshal(appendReq{SessionID: *id, Holder: *holder, Events: []schema.Envelope{e}})
		for try := 0; ; try++ {
			m, err := nc.Request(logstore.SubjectAppend, b, 10*time.Second)
			if err != nil {
				if try < 5 {
					continue
				}
				return 0, err
			}
			var r appendReply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return 0, err
			}
			if r.Error != nil {
				if r.Error.Code == string(schema.CodeOutcomeUnknown) && try < 5 {
					continue
				}
				return 0, fmt.Errorf("%s: %s: %s", e.Type, r.Error.Code, r.Error.Message)
			}
			return r.LastSeq, nil
		}
	}
	for _, e := range []schema.Envelope{
		{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{"agent":"testagent"}`)},
		{Type: schema.TypeTurnStarted, TurnID: "t1"},
		{Type: schema.TypeToolRequested, TurnID: "t1", ToolCallID: "c1", Data: json.RawMessage(`{"name":"sh","input":{"cmd":"deploy"}}`)},
	} {
		if _, err := send(e); err != nil {
			return err
		}
	}
	seq, err := send(schema.Envelope{Type: schema.TypeToolStarted, TurnID: "t1", ToolCallID: "c1"})
	if err != nil {
		return err
	}
	hb, _ := json.Marshal(map[string]string{"sessionId": *id, "holder": *holder})
	if _, err := nc.Request(logstore.SubjectHeartbeat, hb, 10*time.Second); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	fmt.Printf("STARTED %d\n", seq)
	// The "tool" runs; the agent keeps its lease until it is killed.
	for {
		time.Sleep(*ttl / 3)
		if _, err := nc.Request(logstore.SubjectHeartbeat, hb, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "testagent: heartbeat:", err)
		}
	}
}

func runRepairer(args []string) error {
	fs := flag.NewFlagSet("repairer", flag.ContinueOnError)
	url := fs.String("nats-url", nats.DefaultURL, "")
	ttl := fs.Duration("ttl", 30*time.Second, "")
	grace := fs.Duration("grace", repairer.DefaultGrace, "")
	sweep := fs.Duration("sweep", repairer.DefaultSweepInterval, "")
	conc := fs.Int("concurrency", 0, "")
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
	st, err := logstore.Open(ctx, nc, logstore.Config{LeaseTTL: *ttl, Logger: log})
	if err != nil {
		return err
	}
	svc, err := repairer.New(repairer.Config{Store: st, Logger: log, LeaseTTL: *ttl, Grace: *grace, SweepInterval: *sweep, Concurrency: *conc})
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
