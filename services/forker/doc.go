// Package forker is the sessionlog-forker service: it copies a safe prefix
// of a session into a new session (DESIGN.md section 8, docs/adr/005).
//
// A fork request on sessions.api.fork names the parent and a cut. The
// forker scans the parent's log once to resolve the cut against its safe
// points (pkg/session), then streams the prefix again, writing the child in
// atomic batches of at most 1,000 events: a synthetic session/created with
// the parent, copies of events 2..k with the same seqs and new
// deterministic ids, and fork/committed. Until that commit the child
// refuses appends with forking. A record in the SESSION_FORKS bucket marks
// each copy in flight, so a forker that restarts finds copies a crash left
// behind and finishes them; a copy that cannot be finished is abandoned
// with session/closed reason "fork abandoned". The parent is only read.
package forker
