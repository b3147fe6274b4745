// Package gen makes valid sessions for tests and benchmarks: streams of
// events that pkg/session folds without error, in three shapes, and the
// helpers that store them, and the files an agent writes. It imports no
// service, so every package's tests can use it.
//
//   - Exact: a session of exactly n events of about 200 bytes each, in
//     turns of TurnEvents events, whose last seq is a safe point; Seed
//     appends one through the store's checked append (the fork, erase and
//     load benchmarks, and tests that need a session of a given length).
//   - Session and Fleet: an open-ended scripted session (model calls, tool
//     calls, goal updates, compactions), and many of them interleaved as
//     a fleet of agents writes them; Fill and Publish store them with no
//     sequence check (the projector's tests, the catch-up benchmarks).
//   - Chat: a session the model sees whole, in events of a chosen size,
//     with rewinds and a compaction (the agentlog formats' and exporters'
//     tests).
//   - ClaudeCodeFiles: Claude Code session files as the agent writes them,
//     for what reads an agent's files (the import benchmark and tests).
package gen

import (
	"encoding/json"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// event is the envelope of session id at seq, with data as its JSON body
// (none when data is nil).
func event(id string, seq uint64, eventID string, at time.Time, typ string, data any) schema.Envelope {
	e := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: eventID, Time: at, Type: typ}
	if data != nil {
		// The scripts' data are maps and structs of strings and numbers,
		// which always encode.
		e.Data, _ = json.Marshal(data)
	}
	return e
}
