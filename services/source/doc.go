// Package source serves an agent's own transcript (DESIGN.md section 15):
// sessions.api.source.append, load, list and subkeys. The entries are
// mapped by pkg/agentlog exactly as `import` maps the agent's file; the
// session they map to is read and appended through the writer
// (pkg/client), and the transcript's key is kept in the source index
// (SESSION_SOURCES) through internal/logstore.
package source
