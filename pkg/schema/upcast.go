package schema

import (
	"encoding/json"
	"fmt"
)

// An Upcaster rewrites an event document of schema version From into
// version From+1. The chain runs in order until Version is reached.
type Upcaster struct {
	From    int
	Migrate func(doc map[string]json.RawMessage) (map[string]json.RawMessage, error)
}

// upcasters is the migration chain; index i migrates version i to i+1.
var upcasters = []Upcaster{
	{From: 0, Migrate: upcastV0},
}

// Upcast migrates a document of version from to the current Version.
func Upcast(b []byte, from int) ([]byte, error) {
	if from < 0 || from >= len(upcasters) {
		return nil, fmt.Errorf("schema: no migration from schemaVersion %d", from)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("schema: upcast: %w", err)
	}
	for v := from; v < Version; v++ {
		u := upcasters[v]
		var err error
		if doc, err = u.Migrate(doc); err != nil {
			return nil, fmt.Errorf("schema: upcast v%d: %w", v, err)
		}
	}
	doc["schemaVersion"] = json.RawMessage(fmt.Sprint(Version))
	return json.Marshal(doc)
}

// upcastV0 migrates the pre-release v0 shape: snake_case envelope fields,
// "kind" for the type, "ts" for the time, "payload" for data, and a
// tool/result that carried {"ok": bool} instead of a status.
func upcastV0(doc map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	rename := map[string]string{
		"session_id":   "sessionId",
		"event_id":     "eventId",
		"kind":         "type",
		"ts":           "time",
		"turn_id":      "turnId",
		"step_id":      "stepId",
		"attempt_id":   "attemptId",
		"tool_call_id": "toolCallId",
		"payload":      "data",
	}
	out := make(map[string]json.RawMessage, len(doc))
	for k, v := range doc {
		if n, ok := rename[k]; ok {
			k = n
		}
		if _, dup := out[k]; dup {
			// Both spellings present: which one wins would depend on map order.
			return nil, fmt.Errorf("field %s is given twice (v0 and v1 spelling)", k)
		}
		out[k] = v
	}
	var typ string
	if err := json.Unmarshal(out["type"], &typ); err != nil {
		return nil, fmt.Errorf("type: %w", err)
	}
	if typ == TypeToolResult {
		var d map[string]json.RawMessage
		if raw, ok := out["data"]; ok {
			if err := json.Unmarshal(raw, &d); err != nil {
				return nil, fmt.Errorf("data: %w", err)
			}
		}
		if d == nil {
			d = map[string]json.RawMessage{}
		}
		if okRaw, has := d["ok"]; has {
			if _, both := d["status"]; both {
				return nil, fmt.Errorf("data has both ok and status")
			}
			var ok bool
			if err := json.Unmarshal(okRaw, &ok); err != nil {
				return nil, fmt.Errorf("data.ok: %w", err)
			}
			delete(d, "ok")
			status := ToolError
			if ok {
				status = ToolOK
			}
			d["status"], _ = json.Marshal(status)
		}
		b, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		out["data"] = b
	}
	return out, nil
}
