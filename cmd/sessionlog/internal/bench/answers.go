package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
)

// AnswersOptions configures the answers benchmark.
type AnswersOptions struct {
	Out io.Writer
	// Progress, if set, gets a line per step.
	Progress io.Writer
	// Binary is the sessionlog executable: the projector runs as its
	// `projector` verb, in its own process, so that its RSS is its own.
	Binary string
	// Events of the one session (a turn is eight events), EventBytes about
	// the size of each.
	Events, EventBytes int
	// Clients ask for each answer and never read it; Hold is how long
	// they stay so before they hang up.
	Clients int
	Hold    time.Duration
	// MemoryLimit is the projector's --memory-limit (its heap budget);
	// WriteTimeout its --write-timeout (0: the default).
	MemoryLimit  string
	WriteTimeout time.Duration
	// Paths are the answers asked for (default AnswerPaths).
	Paths []string
}

// AnswerPaths are the answers of a session's size, after /v1/sessions/{id}.
var AnswerPaths = []string{"/context", "/events?limit=1000", "/export", "/export?format=claude-code", "/export?format=codex",
	"/export?format=pi", "/acp"}

// AnswerFigures are one path's figures: the answer read whole by one
// client, then the projector's RSS before, at its peak and after Clients
// clients asked for it and did not read.
type AnswerFigures struct {
	Path                         string
	Bytes                        int64
	Took                         time.Duration
	RSSBefore, RSSPeak, RSSAfter int64
}

func (o AnswersOptions) say(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

// Answers fills one session of Events events on an embedded server, runs
// the projector on it as a process of its own, and for each path reads the
// answer once, then has Clients clients ask for it and read nothing for
// Hold: the projector's RSS before, at its peak (VmHWM, reset before each
// path) and after the clients hung up. It prints a BENCH line per path
// and returns the figures.
func Answers(ctx context.Context, opt AnswersOptions) ([]AnswerFigures, error) {
	if len(opt.Paths) == 0 {
		opt.Paths = AnswerPaths
	}
	e, err := startEmbedded(ctx, "", "sessionlog-bench-answers-", slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer e.close()
	const id = "big"
	opt.say("answers: filling one session of %d events", opt.Events)
	turns := max(opt.Events/8, 1)
	if _, err := e.st.PublishUnchecked(ctx, gen.Chat(id, turns, opt.EventBytes, false, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))); err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	args := []string{"--data-dir", filepath.Join(e.dir, "projector")}
	if opt.MemoryLimit != "" {
		args = append(args, "--memory-limit", opt.MemoryLimit)
	}
	if opt.WriteTimeout > 0 {
		args = append(args, "--write-timeout", opt.WriteTimeout.String())
	}
	opt.say("answers: the projector catches up")
	p, err := startChildWithin(ctx, time.Hour, opt.Binary, "projector", e.nc.ConnectedUrl(), nil, args...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, err := p.stop(); err != nil {
			opt.say("answers: %v", err)
		}
	}()
	var out []AnswerFigures
	for _, path := range opt.Paths {
		f, err := answerRSS(ctx, opt, p, "/v1/sessions/"+id+path)
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		f.Path = path
		out = append(out, f)
		fmt.Fprintf(opt.Out, "BENCH name=answers-rss path=%s value=%.0f unit=MiB rss_before_mib=%.0f rss_after_mib=%.0f answer_mib=%.1f answer_s=%.1f clients=%d hold_s=%.0f events=%d\n",
			path, mib(f.RSSPeak), mib(f.RSSBefore), mib(f.RSSAfter), mib(f.Bytes), f.Took.Seconds(), opt.Clients, opt.Hold.Seconds(), turns*8+1)
	}
	return out, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// answerRSS measures one path (Answers).
func answerRSS(ctx context.Context, opt AnswersOptions, p *child, path string) (AnswerFigures, error) {
	var f AnswerFigures
	start := time.Now()
	resp, err := http.Get("http://" + p.http + path)
	if err != nil {
		return f, err
	}
	f.Bytes, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return f, err
	}
	if resp.StatusCode != http.StatusOK {
		return f, fmt.Errorf("status %d", resp.StatusCode)
	}
	f.Took = time.Since(start)
	opt.say("answers: %s: %.1f MiB in %s", path, mib(f.Bytes), f.Took.Round(time.Millisecond))
	pid := p.cmd.Process.Pid
	status := fmt.Sprintf("/proc/%d/status", pid)
	f.RSSBefore = procStatusOf(status, "VmRSS:")
	// The peak from here on (clear_refs 5 resets VmHWM to the RSS now).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return f, err
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range opt.Clients {
		c, err := askAndNeverRead(ctx, p.http, path)
		if err != nil {
			return f, err
		}
		conns = append(conns, c)
	}
	select {
	case <-time.After(opt.Hold):
	case <-ctx.Done():
		return f, ctx.Err()
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	// What the process gives back once they are gone (the runtime returns
	// freed pages to the system over a few seconds).
	time.Sleep(5 * time.Second)
	f.RSSPeak, f.RSSAfter = procStatusOf(status, "VmHWM:"), procStatusOf(status, "VmRSS:")
	opt.say("answers: %s: %d clients that do not read: RSS %.0f MiB before, %.0f at the peak, %.0f after", path, opt.Clients, mib(f.RSSBefore), mib(f.RSSPeak), mib(f.RSSAfter))
	return f, nil
}

// askAndNeverRead sends GET path on a connection of its own with a small
// receive buffer (a client far away: loopback would otherwise take tens of
// MB into the kernel) and reads nothing.
func askAndNeverRead(ctx context.Context, addr, path string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
