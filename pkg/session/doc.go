// Package session is the pure domain of sessionlog: it folds a session's
// events into a State and holds the structural rules an append must
// satisfy. The same reducer serves the writer (to check an append), the
// projector (to build views), the repairer (to plan what to close) and the
// forker (to find safe cuts).
//
// It imports no NATS and no Pebble.
package session
