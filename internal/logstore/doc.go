// Package logstore is sessionlog's one JetStream adapter. It provisions the
// SESSIONS stream and the SESSION_LEASES bucket, maps a session id to its
// stream and subject (Locate), appends a session's events atomically with
// the per-subject expected-sequence check, resolves unknown outcomes,
// reads sessions consistently from the stream leader, and keeps leases.
//
// Writer, repairer and forker all append through Store.Append; nothing
// else in sessionlog spells a stream name or subject.
package logstore
