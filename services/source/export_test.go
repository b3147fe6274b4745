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
