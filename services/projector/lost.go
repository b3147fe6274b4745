package projector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Lost on recovery (DESIGN.md section 5): nats-server records what it
// lost of a stream when it recovers the stream's files (a block file that
// index.db names and the disk no longer has, a damaged record it cut a
// block at) and reports it in the stream's detailed state until it
// restarts. That loss can leave the stream's last sequence at or past
// what the projector consumed and the message it consumed whole (the
// events it had not folded yet are gone, and no later append names
// them): the projector reads it at start and on its checks of the
// streams when due (lostEvery), and raises log_rolled_back naming it.
// The server forgets its record when it restarts: StreamLost keeps what
// it reads in logstore.LostBucket and answers the losses kept there too,
// until an operator acknowledges them (`sessionlog verify --ack-lost`).

// lostEvery is how often the running projector reads what the server
// says it lost, besides at start and at the first check after its NATS
// connection reconnected (a single server that restarted): the answer
// lists every deleted sequence of the stream (the server gives its record
// only with them), too much to ask for every rollbackEvery.
const lostEvery = 30 * time.Second

// lostRead is when the server's records were last read, and how many
// times the connection had reconnected then.
type lostRead struct {
	mu         sync.Mutex
	at         time.Time
	reconnects uint64
	failing    bool // the last read failed (said once in the log)
}

// due reports whether the records are to be read again now, and if so
// notes the read.
func (l *lostRead) due(now time.Time, reconnects uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && now.Sub(l.at) < lostEvery && reconnects == l.reconnects {
		return false
	}
	l.at, l.reconnects = now, reconnects
	return true
}

// failed makes the records due again: a read failed. It reports whether
// the read before succeeded.
func (l *lostRead) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = time.Time{}
	first := !l.failing
	l.failing = true
	return first
}

// read notes a read that succeeded.
func (l *lostRead) read() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failing = false
}

// checkLostDue reads the server's records of every stream of infos when
// they are due (always at start: the first read); after a failed read
// they are due again at the next round.
func (rb *rollbacks) checkLostDue(ctx context.Context, infos map[string]streamInfo, now time.Time) {
	if !rb.lost.due(now, rb.ls.Reconnects()) {
		return
	}
	for name := range infos {
		ld, err := rb.ls.StreamLost(ctx, name)
		if err != nil {
			if rb.lost.failed() {
				rb.log.Warn("projector: cannot read what nats-server says it lost of a stream; reading again at each check", "stream", name, "err", err)
			}
			continue
		}
		rb.lost.read()
		if ld == nil {
			continue
		}
		if r := lostReason(name, ld); rb.raise(name, r) {
			rb.log.Error("projector: nats-server reports stored messages lost", "stream", name, "reason", r)
		}
	}
}

// lostReason says what the server lost of stream name.
func lostReason(name string, ld *logstore.LostData) string {
	return fmt.Sprintf("stream %s: nats-server %s: the log lost stored messages", name, ld.Describe())
}
