// Command sessionlog is the one sessionlog binary: a subcommand per service
// (writer, source, projector, repairer, eraser, forker), `up` (everything in one process on
// an embedded JetStream server) and the SRE verbs (ls, show, replay, tail,
// verify, export, import, bench).
//
// Every subcommand is listed in the table commands below; each one's code
// lives in its own file (run<Name>). Run gets the arguments after the
// subcommand name and parses them with newFlags/parseFlags, so every flag
// also reads its SESSIONLOG_ variable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sessionlog/sessionlog/internal/gcpolicy"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/internal/suggest"
	"github.com/sessionlog/sessionlog/internal/version"
)

// command is one subcommand.
type command struct {
	Summary string
	// Run runs the subcommand with the arguments that follow its name. It
	// returns nil on success; a usageError exits 2, any other error 1.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is every subcommand, by name: the services, up, the SRE verbs
// and the benchmarks. Help lists them sorted by name.
var commands = map[string]command{
	// Services, one per process, against --nats-url.
	"writer":    {Summary: "run the writer against --nats-url: sessions.api.append and sessions.api.heartbeat", Run: runWriter},
	"projector": {Summary: "run the projector against --nats-url: Pebble read models, HTTP API, live watch, dashboard", Run: runProjector},
	"repairer":  {Summary: "run the repairer against --nats-url: close what dead agents left open", Run: runRepairer},
	"forker":    {Summary: "run the forker against --nats-url: copy safe prefixes of sessions into new sessions", Run: runForker},
	"source":    {Summary: "run the source service against --nats-url: an agent's own transcript (sessions.api.source.*), through the writer", Run: runSource},
	"eraser":    {Summary: "run the eraser against --nats-url: sessions.api.erase, erase jobs and retention (--retain-closed)", Run: runEraser},
	// Everything in one process.
	"up": {Summary: "run everything in one process: embedded JetStream, all services, dashboard", Run: runUp},
	// SRE verbs: read-only tools (and import, repair, fork) against --nats-url.
	"ls":                {Summary: "list sessions: id, events, last seq, last type, last time", Run: runLs},
	"show":              {Summary: "show <id>: a session's folded state (status, open work, goal, lease)", Run: runShow},
	"replay":            {Summary: "replay <id>: print a session's stored events as JSON lines", Run: runReplay},
	"locate":            {Summary: "locate <id>: print the stream and subject that hold a session", Run: runLocate},
	"tenants":           {Summary: "list tenants: sessions and stored messages of each", Run: runTenants},
	"tail":              {Summary: "tail [<id>]: follow new events live, durable and transient", Run: runTail},
	"verify":            {Summary: "check every session: seq contiguity, decoding, pairing and structure, readability", Run: runVerify},
	"verify-projection": {Summary: "rebuild the projector's views into a temporary store and compare checksums (the projector must be stopped)", Run: runVerifyProjection},
	"export":            {Summary: "export [--session id]: print every stored event as JSON lines (> file.jsonl); --to FORMAT --session ID [-o FILE]: a session in an agent's own format", Run: runExport},
	"ship":              {Summary: "ship --from FORMAT DIR...: follow agent session files as they are written and append their events", Run: runShip},
	"import":            {Summary: "import < file.jsonl: append exported sessions; refuses to overwrite existing ones; --from FORMAT PATH...: import an agent's session files", Run: runImport},
	"repair":            {Summary: "repair <sessionId> [--force]: close what a session left open and pause it (sessions.api.repair)", Run: runRepair},
	"acp":               {Summary: "an Agent Client Protocol agent on stdio for editors: list the fleet's sessions and replay any of them, read-only (through --http-url)", Run: runACP},
	"erase":             {Summary: "erase <id> --reason TEXT [--cascade]: remove a session for good, keep an audit record (sessions.api.erase; operators only)", Run: runErase},
	"fork":              {Summary: "fork a session at a safe point: sessionlog fork <parent> [--at-seq N | --at-turn T] [--child ID]; prints the child id", Run: runFork},
	// Benchmarks (see benches in bench.go).
	"bench": {Summary: "run a benchmark (append, ...) and print BENCH lines", Run: runBench},
	// The binary itself.
	"version":    {Summary: "print the release, the commit it was built from and the Go version", Run: runVersion},
	"completion": {Summary: "completion bash|zsh: a script that completes commands and flags (source <(sessionlog completion bash))", Run: runCompletion},
}

// hidden are commands that help does not list: the completion scripts'
// helper.
var hidden = map[string]command{
	"__complete": {Run: runComplete},
}

// runVersion prints version.Get() (also `sessionlog --version`).
func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("version takes no arguments")
	}
	fmt.Fprintln(stdout, version.Get())
	return nil
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errSilent ends a command with exit status 1 after it has already said
// why (verify prints each problem itself).
var errSilent = sre.ErrSilent

func main() {
	gcpolicy.SetDefault()
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the program with args (without the program name) and returns
// the exit status; tests call it in-process.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printHelp(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				unknownCommand(stderr, args[1])
				return 2
			}
			// Every command prints its own flags on -h.
			_ = c.Run(ctx, []string{"-h"}, stdout, stdout)
			return 0
		}
		printHelp(stdout)
		return 0
	case "-version", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		c, ok = hidden[name]
	}
	if !ok {
		unknownCommand(stderr, name)
		return 2
	}
	err := c.Run(ctx, args[1:], stdout, stderr)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errSilent):
		return 1
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sessionlog %s: %v\n", name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "sessionlog %s: %v\n", name, err)
		return 1
	}
}

// unknownCommand says that name is no command, with the nearest ones when
// they are close (a typo: "lss", "shwo"), else the list of commands.
func unknownCommand(w io.Writer, name string) {
	fmt.Fprintf(w, "sessionlog: unknown command %q\n", name)
	if near := nearCommands(name); len(near) > 0 {
		fmt.Fprintf(w, "Did you mean %s?\nRun \"sessionlog help\" for every command.\n", strings.Join(near, " or "))
		return
	}
	fmt.Fprintln(w)
	printHelp(w)
}

// nearCommands are the nearest commands to name when they are within two
// edits of it (one for names of up to three letters).
func nearCommands(name string) []string {
	limit := 2
	if len(name) <= 3 {
		limit = 1
	}
	return suggest.Near(name, commandNames(), limit)
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `sessionlog keeps the durable, replayable record of what AI agents did.

Usage:
  sessionlog <command> [flags] [args]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", n, commands[n].Summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Run "sessionlog help <command>" or "sessionlog <command> -h" for its flags.
Every flag can also be set with an environment variable: SESSIONLOG_ and the
flag name in upper case with dashes as underscores (--nats-url = SESSIONLOG_NATS_URL).
`)
}

// commandNames lists the commands (for tests).
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
