package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// The completion helper lists the commands, then a command's flags; the
// scripts are valid shell.
func TestCompletion(t *testing.T) {
	complete := func(args ...string) []string {
		var out bytes.Buffer
		if code := Main(context.Background(), append([]string{"__complete"}, args...), &out, &out); code != 0 {
			t.Fatalf("__complete %v: exit %d: %s", args, code, out.String())
		}
		return strings.Fields(out.String())
	}
	cmds := complete()
	if strings.Join(cmds, " ") != strings.Join(commandNames(), " ") {
		t.Errorf("commands %v, want %v", cmds, commandNames())
	}
	flags := strings.Join(complete("fork", "p"), " ")
	for _, f := range []string{"--at-seq", "--json", "--nats-url", "--progress"} {
		if !strings.Contains(flags, f) {
			t.Errorf("fork flags %q lack %s", flags, f)
		}
	}
	if got := complete("no-such"); len(got) != 0 {
		t.Errorf("flags of an unknown command: %v", got)
	}
	var help bytes.Buffer
	Main(context.Background(), []string{"help"}, &help, &help)
	if strings.Contains(help.String(), "__complete") {
		t.Error("help lists the hidden __complete")
	}
	for shell, check := range map[string][]string{"bash": {"bash", "-n"}, "zsh": nil} {
		var script bytes.Buffer
		if code := Main(context.Background(), []string{"completion", shell}, &script, &script); code != 0 || !strings.Contains(script.String(), "sessionlog __complete") {
			t.Fatalf("completion %s: exit %d\n%s", shell, code, script.String())
		}
		if check == nil {
			continue
		}
		cmd := exec.Command(check[0], check[1:]...)
		cmd.Stdin = &script
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s -n of the script: %v\n%s", shell, err, out)
		}
	}
}
