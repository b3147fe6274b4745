// Package session is the pure domain of sessionlog: it folds a session's
// events into a State and holds the structural rules an append must
// satisfy. The same reducer serves the writer (to check an append), the
// projector (to build views), the repairer (to plan what to close) and the
// forker (to find safe cuts).
//
// apply.go holds the rules every event is held to and the table of event
// families; each family's rules (the session, turns, tools, approvals,
// compactions, the goal, jobs, forks and repairs) are a file of their own,
// rules_<family>.go: a check that says what the event changes, and the
// commit that changes it.
//
// It imports no NATS and no Pebble.
package session
