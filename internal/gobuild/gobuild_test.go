package gobuild

import "testing"

func TestCommandName(t *testing.T) {
	for pkg, want := range map[string]string{
		"github.com/sessionlog/sessionlog/cmd/sessionlog": "sessionlog",
		"github.com/nats-io/nats-server/v2":               "nats-server",
		"example.com/tool/v10":                            "tool",
		"example.com/v2tool":                              "v2tool",
		"example.com/tool/v":                              "v",
	} {
		if got := commandName(pkg); got != want {
			t.Errorf("commandName(%q) = %q, want %q", pkg, got, want)
		}
	}
}
