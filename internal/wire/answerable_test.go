package wire

import "testing"

func TestAnswerable(t *testing.T) {
	for reply, want := range map[string]bool{
		"_INBOX.abc.1":                  true,
		"_INBOX_host7.abc":              true,
		"myapp.replies.42":              true,
		"":                              false,
		"sessions.ev.victim":            false,
		"sessions.api.append":           false,
		"sessions.live.s-1":             false,
		"$KV.SESSION_LEASES.s-1":        false,
		"$JS.API.STREAM.PURGE.SESSIONS": false,
		"$SRV.PING":                     false,
		"_SL_SVC.aBcD.1":                true,
		"_SL_OP.aBcD.1":                 true,
	} {
		if got := Answerable(reply); got != want {
			t.Errorf("Answerable(%q) = %v, want %v", reply, got, want)
		}
	}
}
