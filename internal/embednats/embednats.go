// Package embednats starts a nats-server inside the process, as
// `sessionlog up` runs its own: the server logs through slog, and a
// failure the server reports as fatal (a taken port) is an error returned
// to the caller instead of the end of the process.
package embednats

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long Start waits for the server to accept
// clients.
const readyTimeout = 2 * time.Minute

// Start starts the server and waits until it accepts clients and
// JetStream is up. A listen failure is reported by the server through its
// logger's Fatalf, which is caught here instead of exiting.
func Start(opts *server.Options, log *slog.Logger) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	sl := &serverLogger{log: log, fatal: make(chan string, 1)}
	ns.SetLoggerV2(sl, false, false, false)
	go ns.Start()
	deadline := time.Now().Add(readyTimeout)
	for !ns.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-sl.fatal:
			ns.Shutdown()
			return nil, fmt.Errorf("nats-server: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			ns.Shutdown()
			return nil, fmt.Errorf("nats-server not ready after %s", readyTimeout)
		}
	}
	if opts.JetStream && !ns.JetStreamEnabled() {
		ns.Shutdown()
		return nil, errors.New("nats-server: jetstream did not start")
	}
	return ns, nil
}

// serverLogger forwards nats-server logs to slog.
type serverLogger struct {
	log   *slog.Logger
	fatal chan string
}

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg, "fatal", true)
	select {
	case l.fatal <- msg:
	default:
	}
}

var _ server.Logger = (*serverLogger)(nil)
