package clientlog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// requestSlack is the room an append request keeps for all but its
// events' estimated size (agentlog.AppendSink.MaxBytes).
const requestSlack = 4 << 10

// FileSink is the AppendSink import and ship read a file into:
// appends sized under the connection's max payload, the file named so
// that a file that is no longer a continuation of its session goes to a
// new generation and two files with one session id stay apart, and a
// session a repair paused resumed by the log's holder.
func FileSink(ctx context.Context, l Log, path string, batch int, warn func(string)) *agentlog.AppendSink {
	by := l.Holder
	if by == "" {
		by = "import:" + agentlog.ItemID(filepath.Base(path))
	}
	return &agentlog.AppendSink{Ctx: ctx, Log: l, Batch: batch, MaxBytes: int(l.Client.Conn().MaxPayload()) - requestSlack,
		By: by, File: agentlog.FileLabel(path), Warn: warn}
}

// RecordSourceKey records a Claude Code file's transcript key (project
// directory, session, subagent subpath) with an empty
// sessions.api.source.append, so that the Claude Agent SDK store lists the
// session under its project and no other project's key can claim it
// (DESIGN.md section 15, docs/adr/007-source-index.md). It reports whether
// the key is recorded (or never will be: not a Claude Code transcript
// path, or refused); what went wrong is said on w.
func RecordSourceKey(ctx context.Context, cl *client.Client, format, path, verb string, w io.Writer) bool {
	k, ok := CCSourceKey(path)
	if format != "claude-code" || !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := cl.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: k, Entries: []json.RawMessage{}})
	switch client.CodeOf(err) {
	case "":
		if err == nil {
			return true
		}
	case schema.CodeNotCommitted, schema.CodeOutcomeUnknown:
	default:
		// Refused (another project's session, a key the store cannot
		// have): said once, the file is taken in all the same.
		fmt.Fprintf(w, "%s: %s: transcript key %s/%s not recorded: %v\n", verb, path, k.ProjectKey, k.SessionKey, err)
		return true
	}
	// No writer answered, or no answer: tried again on the file's next
	// pass (ship) or the next run (import).
	fmt.Fprintf(w, "%s: %s: recording its transcript key %s/%s: %v\n", verb, path, k.ProjectKey, k.SessionKey, err)
	return false
}

// CCSourceKey is the Claude Agent SDK's key of a Claude Code transcript
// path: <project>/<session>.jsonl, or
// <project>/<session>/subagents/agent-<id>.jsonl.
func CCSourceKey(path string) (api.SourceKey, bool) {
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	dir := filepath.Dir(path)
	k := api.SourceKey{Format: "claude-code", ProjectKey: filepath.Base(dir), SessionKey: name}
	if filepath.Base(dir) == "subagents" {
		session := filepath.Dir(dir)
		k = api.SourceKey{Format: "claude-code", ProjectKey: filepath.Base(filepath.Dir(session)), SessionKey: filepath.Base(session),
			Subpath: "subagents/" + name}
	}
	return k, k.ProjectKey != "" && k.ProjectKey != "." && k.ProjectKey != string(filepath.Separator)
}
