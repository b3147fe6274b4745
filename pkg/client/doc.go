// Package client is the Go client agents use to keep their session log in
// sessionlog (DESIGN.md sections 4, 7 and 8).
//
// Client.Append sends a request to sessions.api.append and returns one of
// the three outcomes of an append: committed (an AppendResult), not
// committed (errors.Is(err, ErrNotCommitted): nothing was stored, safe to
// send again), or unknown (errors.Is(err, ErrOutcomeUnknown): it may be
// stored; send the same request again). Event ids are ULIDs chosen here
// before the first send, so an unknown outcome is retried automatically
// with the same ids, a bounded number of times, and the writer answers a
// retry of a committed request as a duplicate. Every other refusal is an
// *Error with the contract code, matched by one sentinel per code
// (errors.Is(err, ErrConflict), ...).
//
// Session carries the checkpoint policy of section 7: StartAttempt returns
// only once attempt/started is durable (it is what permits the LLM
// request), StartTool only once tool/started is durable (RunTool runs the
// side effect only after that), EndTurn only once turn/ended is durable.
// Live publishes transient events on sessions.live.<id> and never waits.
//
// The client takes the caller's *nats.Conn, with the caller's inbox prefix
// for replies. An agent of a tenant other than the default may subscribe
// only to its own inbox prefix, _INBOX.<user> (DESIGN.md section 2,
// docs/adr/010-tenants-and-ownership.md): connect it with
// nats.CustomInboxPrefix("_INBOX.<user>") and call CheckInbox once, which
// says at once (ErrInboxRefused) when the server refuses the connection's
// inbox, where every request would otherwise wait out its timeout.
// Such an agent names its sessions by their ids; they are stored as
// _T<tenant>_<id>, and Load folds them under the id it was given.
//
// Load rebuilds a session's State from the log, a page at a time through
// sessions.api.read (a Client is a Reader), so an agent host needs no
// JetStream permission. The package imports nothing internal to
// sessionlog: the wire types are pkg/api's.
package client
