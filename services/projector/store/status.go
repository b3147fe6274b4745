package store

// Session statuses (DESIGN.md section 5).
//
// They are derived from the log alone, never from the clock, so a rebuild
// reproduces them exactly:
//   - closed: session/closed was folded;
//   - paused: paused (by the agent or a repair) and not resumed;
//   - active: a turn or any other work (step, attempt, tool call, approval,
//     compaction, job) is open, or a fork copy is still being written;
//   - interrupted: nothing is open and the last turn ended interrupted,
//     aborted or failed;
//   - idle: nothing is open and the last turn (if any) completed;
//   - unreadable: the session holds an event this reader must not fold
//     (unknown required type, newer schema, undecodable, or one that
//     breaks the session rules); folding stopped before it;
//   - gap: an event's seq skipped ahead and the stream did not hold the
//     missing ones; folding stopped before it.
//
// How long ago the last activity was is the reader's business: the API
// returns lastActivity and the dashboard shows it relative to now.
const (
	StatusActive      = "active"
	StatusIdle        = "idle"
	StatusPaused      = "paused"
	StatusInterrupted = "interrupted"
	StatusClosed      = "closed"
	StatusUnreadable  = "unreadable"
	StatusGap         = "gap"
)

// Statuses lists every status.
var Statuses = []string{StatusActive, StatusIdle, StatusPaused, StatusInterrupted, StatusClosed, StatusUnreadable, StatusGap}

// ValidStatus reports whether s is one of Statuses.
func ValidStatus(s string) bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}
