package projector

import (
	"context"
	"fmt"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Lost on recovery (DESIGN.md section 5): nats-server records what it
// lost of a stream when it recovers the stream's files (a block file that
// index.db names and the disk no longer has, a damaged record it cut a
// block at) and reports it in the stream's detailed state until it
// restarts. That loss can leave the stream's last sequence at or past
// what the projector consumed and the message it consumed whole (the
// events it had not folded yet are gone, and no later append names
// them): the projector reads it at start and at every check, and raises
// log_rolled_back naming it.

// checkLost reads what nats-server says it lost of stream name and raises
// log_rolled_back when it names a loss; a failed read is looked at again
// on the next round.
func (s *Service) checkLost(ctx context.Context, name string) {
	ld, err := s.ls.StreamLost(ctx, name)
	if err != nil || ld == nil {
		return
	}
	if r := lostReason(name, ld); s.rb.raise(name, r) {
		s.log.Error("projector: nats-server reports stored messages lost", "stream", name, "reason", r)
	}
}

// lostReason says what the server lost of stream name.
func lostReason(name string, ld *logstore.LostData) string {
	return fmt.Sprintf("stream %s: nats-server %s: the log lost stored messages", name, ld.Describe())
}
