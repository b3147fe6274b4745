// Package writer is the sessionlog-writer NATS micro service: the one path
// by which agents append to a session (DESIGN.md section 4).
//
// A request on sessions.api.append is parsed strictly, its events are
// completed (schemaVersion, sessionId, seq, eventId, time) and validated as
// agent events, checked against the session's current state (folded from
// the log and kept in a bounded cache), and appended through
// logstore.Store.Append with the per-subject expected-sequence check. The
// reply is sent only after JetStream acknowledged every event.
//
// Appends of one session are serialized inside the process (striped
// mutexes), so a writer never conflicts with itself; several replicas share
// the load through a queue group and the per-subject check orders them.
// A request that names a holder renews the holder's lease in SESSION_LEASES
// at most every third of the lease TTL per session.
//
// The writer subscribes to nothing but its two endpoints: transient events
// (sessions.live.*) never reach the stream through it.
package writer
