package source

import (
	"github.com/sessionlog/sessionlog/internal/clientlog"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// SinkLog is the log a source append of caller's sink writes through, for
// the session mapped to wire, asked for as asked and stored as stored.
func (s *Service) SinkLog(caller api.Caller, wire, asked, stored string) clientlog.Log {
	return s.sinkLog(sourceSess{sc: scope{caller: caller}, wire: wire, asked: asked, stored: stored})
}

// AfterCheck runs fn in each source append between the check that its
// caller may use the session and the record of its key (nil: nothing).
func (s *Service) AfterCheck(fn func()) {
	if fn == nil {
		s.afterCheck.Store(nil)
		return
	}
	s.afterCheck.Store(&fn)
}
