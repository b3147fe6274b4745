package logstore

import "github.com/nats-io/nats.go"

// The rules of what is stored, for another log that keeps a session's
// events the way this store does (internal/memlog, which services' rule
// scripts run on): the same messages, headers and tails, by the same code.

// Defaults is cfg with the defaults Open fills in.
func Defaults(cfg Config) Config {
	cfg.defaults()
	return cfg
}

// BuildMessages builds the messages Append sends for req on subject, the
// first written after the body whose ChainHash is prev (Messages, once
// the store found prev): the same checks, bodies and headers.
func BuildMessages(cfg Config, req *AppendRequest, subject, prev string) ([]*nats.Msg, error) {
	return (&Store{cfg: cfg}).messages(req, subject, prev)
}

// TailOf is the tail of a session whose last stored message is m (nil:
// the session has none), as Tail reads it; a message that is not an event
// gets Judge's verdict.
func TailOf(sessionID string, m *Msg) (Tail, error) { return tailOf(sessionID, m) }

// TailPositionOf is where the last stored message m of a session is, with
// its verdict, as TailPosition answers them (m's body is open, or plain).
func TailPositionOf(sessionID string, m *Msg) (Tail, *UnreadableError, error) {
	t, err := tailOf(sessionID, m)
	return tailPosition(t, m, err)
}
