// Package agentlog maps the session files that agent CLIs write (Claude
// Code, codex, pi) to sessionlog sessions and back (DESIGN.md section 13).
// It is pure: no NATS, no Pebble. The import command, ship and the
// projector's export drive it; a package per format (claudecode, codex, pi)
// implements Format.
//
// # How a file becomes a session
//
// ReadFile reads one file line by line, once, and maps every line, in
// file order, into one session whose events it hands to a Sink one by one
// (a file is one session; its tree, where the format has one, does not
// make sessions). Every complete line is also a source/line event, so an
// export to the file's own format gives the file back. A prompt that goes
// back in the file's tree is a rewind (Builder.Rewind, context/rewound):
// the model-visible context continues from an earlier line, the
// abandoned part staying in the log; VisibleEvents gives that context.
//
// Event ids come from the source: the line's Key (its uuid or entry id; the
// line index when it has none) and the index of the event within the line
// ("<key>.<n>"), so mapping the same file twice gives the same events, and
// a file that grew gives the same events for its old lines followed by new
// ones. Everything a format decides must therefore depend only on the lines
// before and including the current one, never on what follows or on where
// the file ends.
//
// # Implementing a format
//
// A format package provides a value of type Format:
//
//   - Name is the --from/--to name ("claude-code", "codex", "pi") and the
//     "agent" of session/created; Prefix is the session id prefix ("cc").
//   - IsSessionFile says which files of a walked directory are sessions.
//   - SessionID names the session of a file from its path and its first
//     complete line; build it with SessionID(prefix, sourceID) so the
//     character and length rules of section 13 hold.
//   - NewMapper returns the per-file, per-pass state. Its Decode parses one
//     complete line (an error marks the line damaged: skipped with a warning
//     naming file and line, or left for later when it is the last line) and
//     returns a Line with Key, Time and the parsed value. Decode may be
//     called twice for a line (Continuation.Check); keep the mapper's
//     state in Map.
//     Map then drives the Builder with the semantic steps of the line:
//     Meta (title, labels), Prompt, Assistant (one call per line; lines that
//     share a message id are one message), ToolResult, EndTurn, Interrupt,
//     CompactionStart/CompactionEnd (or Compaction for both), Rewind,
//     Skip. The
//     Builder checks every event against pkg/session's rules and turns a
//     step that does not fit (a result for an unknown call, a turn end with
//     a call open) into a counted skip, so a format never has to.
//   - Export writes a session back as it reads it, never holding it:
//     Export.EachLine gives the verbatim source lines when the session was
//     imported from this format (write them first, as they are), and
//     Export.EachEvent the mapped events that follow them (all of them
//     when there are no lines): repairs, continuations, or a whole session
//     from another agent. Each reads the session again (a page at a time
//     from the log); what must be known before writing (the fold, whether
//     anything follows the lines, the first time, the compactions) was
//     read by NewExport. Keep only what is open (OpenCalls), so an
//     export's memory does not grow with the session. Every tool call must be
//     answered exactly once in the output: a repaired result
//     (outcome_unknown, not_started) becomes an error result with
//     RepairNote's text, and every call the output holds without a result
//     gets one too. Export.Unanswered lists the open calls of the events,
//     but the source lines may hold calls that never became events (a
//     message cut off before it was complete): track the calls you write,
//     as claudecode does.
//
// Content conventions, shared by all formats so a session exported to
// another format keeps its model-visible context: message/user and
// message/assistant "content" is a JSON string or an array of content
// blocks in the Anthropic shape ({"type":"text","text":...}; other block
// types are kept as the source has them); tool calls are never inside the
// assistant content but their own tool/requested events; tool/result
// "output" is the source's result content (a string or an array of blocks).
package agentlog
