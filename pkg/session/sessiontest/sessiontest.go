// Package sessiontest reads the short form tests write events in:
//
//	<type> [turn=] [step=] [attempt=] [call=] [id=] [session=] [seq=]
//	       [synthetic] [ignorable] [<data member>=<JSON or string>]...
//
// for example "turn/started turn=t1" or "tool/result turn=t1 call=c1
// status=ok". A line that starts with "{" is a JSON envelope instead.
// Data members a line leaves out take the type's value in Defaults, so a
// test names only what it is about.
package sessiontest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Defaults are the data members an event of each type gets when its line
// does not name them: enough for the type's required members.
var Defaults = map[string]map[string]string{
	schema.TypeSessionPaused:     {"reason": `"test"`},
	schema.TypeSessionResumed:    {"by": `"test"`},
	schema.TypeSessionClosed:     {"reason": `"test"`},
	schema.TypeTurnEnded:         {"reason": `"completed"`},
	schema.TypeMessageAssistant:  {"content": `"hi"`},
	schema.TypeAttemptInterrupt:  {"reason": `"test"`},
	schema.TypeMessageUser:       {"content": `"hi"`},
	schema.TypeToolRequested:     {"name": `"sh"`, "input": `{}`},
	schema.TypeToolResult:        {"status": `"ok"`},
	schema.TypeApprovalRequested: {"prompt": `"ok?"`},
	schema.TypeApprovalDecided:   {"decision": `"approved"`},
	schema.TypeCompactionEnded:   {"summary": `"summary"`},
	schema.TypeCompactionAborted: {"reason": `"test"`},
	schema.TypeGoalUpdated:       {"objective": `"objective"`, "status": `"active"`},
	schema.TypeJobEnded:          {"status": `"exited"`},
	schema.TypeRepairApplied:     {"reason": `"lease expired"`, "closed": `[]`},
	schema.TypeSessionTitled:     {"title": `"title"`},
	schema.TypeContextRewound:    {"toEventId": `"e1"`},
}

// Event parses line, failing t if it cannot. The envelope has
// schemaVersion set; session, seq, id and time are whatever the line says.
func Event(t testing.TB, line string) *schema.Envelope {
	t.Helper()
	e, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Parse is Event returning the error.
func Parse(line string) (*schema.Envelope, error) {
	if strings.HasPrefix(line, "{") {
		var e schema.Envelope
		if err := schema.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		return &e, nil
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty event line")
	}
	e := &schema.Envelope{SchemaVersion: schema.Version, Type: fields[0]}
	data := map[string]json.RawMessage{}
	for _, f := range fields[1:] {
		k, v, hasValue := strings.Cut(f, "=")
		switch {
		case !hasValue && k == "synthetic":
			e.Synthetic = true
		case !hasValue && k == "ignorable":
			e.Ignorable = true
		case !hasValue:
			return nil, fmt.Errorf("%s: bad field %q", line, f)
		case k == "turn":
			e.TurnID = v
		case k == "step":
			e.StepID = v
		case k == "attempt":
			e.AttemptID = v
		case k == "call":
			e.ToolCallID = v
		case k == "id":
			e.EventID = v
		case k == "session":
			e.SessionID = v
		case k == "seq":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", line, err)
			}
			e.Seq = n
		default:
			if json.Valid([]byte(v)) {
				data[k] = json.RawMessage(v)
			} else {
				data[k], _ = json.Marshal(v)
			}
		}
	}
	for k, v := range Defaults[e.Type] {
		if _, ok := data[k]; !ok {
			data[k] = json.RawMessage(v)
		}
	}
	if len(data) > 0 {
		b, err := json.Marshal(data)
		if err != nil {
			return nil, err
		}
		e.Data = b
	}
	return e, nil
}
