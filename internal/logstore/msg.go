package logstore

// EventID is the event id of a stored message, taken from its Nats-Msg-Id
// (MsgID: "<sessionId>:<eventId>").
func (m *Msg) EventID() string { return eventIDOf(m.Header.Get(HeaderMsgID)) }
