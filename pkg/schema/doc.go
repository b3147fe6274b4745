// Package schema defines the sessionlog event envelope (schema version 1), the
// registry of event types with the ids and data fields each one requires,
// validation, the upcaster chain for older schema versions, the JSON codec
// and the append error codes of the wire contract.
//
// It imports no NATS and no Pebble: every other package builds on it.
package schema
