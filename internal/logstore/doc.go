// Package logstore is sessionlog's one JetStream adapter. It provisions the
// SESSIONS stream and the SESSION_LEASES and SESSION_CLAIMS buckets (and,
// for the forker, SESSION_FORKS), maps a session id to its stream and
// subject (Locate), appends a session's events atomically with the
// per-subject expected-sequence check (and several sessions' appends as
// one atomic batch: AppendGroup), classifies what a failed append stored,
// resolves unknown outcomes, reads sessions consistently from the stream
// leader, and keeps leases and claims.
//
// Writer, repairer and forker all append through the Store; nothing
// else in sessionlog spells a stream name or subject.
package logstore
