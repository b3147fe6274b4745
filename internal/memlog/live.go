package memlog

import (
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// LiveSub is a subscription to a session's transient events (Live).
type LiveSub struct {
	l  *Log
	id string
	fn func(logstore.LiveMsg)
}

// Live calls fn for each transient event of the session PublishLive
// publishes (of every session with sessionID ""), as logstore's Live
// calls it for those published on sessions.live.<id>: one event at a
// time, on PublishLive's goroutine. None is dropped: pendingBytes means
// nothing in memory.
func (l *Log) Live(sessionID string, pendingBytes int, fn func(logstore.LiveMsg)) (*LiveSub, error) {
	if sessionID != "" {
		if err := logstore.ValidateSessionID(sessionID); err != nil {
			return nil, err
		}
	}
	sub := &LiveSub{l: l, id: sessionID, fn: fn}
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	l.live = append(l.live, sub)
	return sub, nil
}

// PublishLive gives a transient event of the session (from inside the
// services' account: the zero Caller) to its subscriptions (Live).
func (l *Log) PublishLive(sessionID string, h nats.Header, data []byte) {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	for _, sub := range l.live {
		if sub.id == "" || sub.id == sessionID {
			sub.fn(logstore.LiveMsg{SessionID: sessionID, Header: h, Data: data})
		}
	}
}

// Dropped is 0: PublishLive waits for each subscription's fn.
func (s *LiveSub) Dropped() int { return 0 }

// Close ends the subscription.
func (s *LiveSub) Close() error {
	s.l.liveMu.Lock()
	defer s.l.liveMu.Unlock()
	s.l.live = slices.DeleteFunc(s.l.live, func(o *LiveSub) bool { return o == s })
	return nil
}
