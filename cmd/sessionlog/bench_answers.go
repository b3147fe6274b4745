package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench answers [--events N]`: the projector's RSS (as its own
// process) before, at its peak and after 20 clients ask for an answer of a
// million-event session and never read it: /context, /events, /export in
// its own format and in Claude Code's, codex's and pi's, ACP replay
// (internal/bench.Answers).
func runBenchAnswers(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench answers")
	fs.SetOutput(stdout)
	events := fs.Int("events", 1_000_000, "events of the session")
	eventBytes := fs.Int("event-bytes", 230, "about the size of each event")
	clients := fs.Int("clients", 20, "clients that ask for each answer and never read it")
	hold := fs.Duration("hold", 20*time.Second, "how long they stay before they hang up")
	memLimit := fs.String("memory-limit", "", "the projector's --memory-limit (default its own)")
	writeTimeout := fs.Duration("write-timeout", 0, "the projector's --write-timeout (default its own)")
	verbose := fs.Bool("v", false, "print progress to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *events < 8 || *clients < 1 || *hold <= 0 {
		return usageErrorf("--events must be >= 8, --clients >= 1, --hold > 0")
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	opt := bench.AnswersOptions{Out: stdout, Binary: bin, Events: *events, EventBytes: *eventBytes, Clients: *clients, Hold: *hold,
		MemoryLimit: *memLimit, WriteTimeout: *writeTimeout}
	if *verbose {
		opt.Progress = os.Stderr
	}
	if _, err := bench.Answers(ctx, opt); err != nil {
		return fmt.Errorf("bench answers: %w", err)
	}
	return nil
}
