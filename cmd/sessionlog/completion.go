package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
)

// `sessionlog completion bash|zsh`: a shell script that completes the
// commands and their flags. The script asks the binary itself (the hidden
// command __complete), so it never goes stale when flags change.

const bashCompletion = `# sessionlog completion for bash: source <(sessionlog completion bash)
_sessionlog() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	COMPREPLY=($(compgen -W "$(sessionlog __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _sessionlog sessionlog
`

const zshCompletion = `#compdef sessionlog
# sessionlog completion for zsh: source <(sessionlog completion zsh)
_sessionlog() {
	local -a words_
	words_=(${(f)"$(sessionlog __complete ${words[2,CURRENT-1]} 2>/dev/null)"})
	compadd -a words_
}
compdef _sessionlog sessionlog
`

func runCompletion(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) != 1 {
		return usageErrorf("usage: sessionlog completion bash|zsh")
	}
	switch args[0] {
	case "bash":
		_, err := io.WriteString(stdout, bashCompletion)
		return err
	case "zsh":
		_, err := io.WriteString(stdout, zshCompletion)
		return err
	}
	return usageErrorf("completion %q: want bash or zsh", args[0])
}

// runComplete prints the words that may follow args, one a line: the
// commands after none, else the flags of the command args[0] names.
func runComplete(ctx context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) == 0 {
		for _, n := range commandNames() {
			fmt.Fprintln(stdout, n)
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok || args[0] == "__complete" {
		return nil
	}
	for _, f := range commandFlags(ctx, c) {
		fmt.Fprintln(stdout, "--"+f)
	}
	return nil
}

// commandFlags are the flag names of a command, read from its -h.
func commandFlags(ctx context.Context, c command) []string {
	var usage bytes.Buffer
	_ = c.Run(ctx, []string{"-h"}, &usage, &usage)
	var out []string
	sc := bufio.NewScanner(&usage)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		name := strings.TrimPrefix(line, "  -")
		if i := strings.IndexAny(name, " \t"); i >= 0 {
			name = name[:i]
		}
		out = append(out, name)
	}
	return out
}
