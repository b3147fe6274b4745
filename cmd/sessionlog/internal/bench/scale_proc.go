package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// child is a service of the sessionlog binary run as its own process
// against the benchmark's server, so that its peak RSS and CPU are its
// own, not shared with the server and the load.
type child struct {
	name string
	cmd  *exec.Cmd
	http string // its /healthz /readyz /metrics listener
	// lines gets every line it writes to stderr (its JSON log) until it
	// exits; tail keeps the last ones for an error.
	lines  func(string)
	mu     sync.Mutex
	tail   []string
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startChild runs `<bin> <verb> --nats-url url --http-listen <free port>
// args...` and waits until its /readyz answers 200.
func startChild(ctx context.Context, bin, verb, url string, lines func(string), args ...string) (*child, error) {
	return startChildWithin(ctx, time.Minute, bin, verb, url, lines, args...)
}

// startChildWithin is startChild waiting up to timeout for /readyz (a
// projector is ready once it caught up).
func startChildWithin(ctx context.Context, timeout time.Duration, bin, verb, url string, lines func(string), args ...string) (*child, error) {
	port, err := natstest.FreePort()
	if err != nil {
		return nil, err
	}
	c := &child{name: verb, http: fmt.Sprintf("127.0.0.1:%d", port), lines: lines, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, append([]string{verb, "--nats-url", url, "--http-listen", c.http}, args...)...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", verb, err)
	}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			if c.tail = append(c.tail, sc.Text()); len(c.tail) > 20 {
				c.tail = c.tail[1:]
			}
			c.mu.Unlock()
			if c.lines != nil {
				c.lines(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-logged
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + c.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-c.exited:
			return nil, fmt.Errorf("%s exited before it was ready: %v: %s", verb, c.err, c.lastLines())
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.kill()
			return nil, fmt.Errorf("%s not ready after %s: %s", verb, timeout, c.lastLines())
		}
	}
}

func (c *child) lastLines() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// cpu is the user and system CPU time the process has used so far.
func (c *child) cpu() (time.Duration, error) { return procCPU(c.cmd.Process.Pid) }

// procCPU is the user and system CPU time process pid has used so far,
// from /proc/<pid>/stat in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from the state after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("process %d: short /proc stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// peakRSS is the process's peak RSS so far: VmHWM of /proc/<pid>/status.
// Not the ru_maxrss its wait returns: a child forked with CLONE_VM (as Go
// starts processes) is charged at exec with the peak of the parent's
// memory it shared until then, here the benchmark's with its server.
func (c *child) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib << 10, err
		}
	}
	return 0, fmt.Errorf("%s: no VmHWM in /proc status", c.name)
}

// stop reads the process's peak RSS, then ends it as an operator would
// (SIGTERM) and waits for it to exit.
func (c *child) stop() (peakRSS int64, err error) {
	if peakRSS, err = c.peakRSS(); err != nil {
		return 0, err
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.kill()
		return 0, fmt.Errorf("%s did not stop within 30s of SIGTERM", c.name)
	}
	if c.err != nil {
		return 0, fmt.Errorf("%s: %v: %s", c.name, c.err, c.lastLines())
	}
	return peakRSS, nil
}

// metrics scrapes the process's /metrics: every sample, by its name and
// labels as written ("name{label=\"v\"}").
func (c *child) metrics() (map[string]float64, error) {
	resp, err := http.Get("http://" + c.http + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}
