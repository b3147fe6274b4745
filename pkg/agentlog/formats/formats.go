// Package formats lists the agent file formats sessionlog reads and
// writes, by their --from/--to name.
package formats

import (
	"sort"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// all holds one entry per format.
var all = map[string]agentlog.Format{
	claudecode.Name: claudecode.Format{},
	codex.Name:      codex.Format{},
	pi.Name:         pi.Format{},
}

// Lookup returns the format called name.
func Lookup(name string) (agentlog.Format, bool) {
	f, ok := all[name]
	return f, ok
}

// Names lists the formats' names, sorted.
func Names() []string {
	var out []string
	for n := range all {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
