package natstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionlog/sessionlog/internal/gobuild"
)

// Process is a single JetStream node running as a child process: the
// nats-server command of the module's own nats-server version, built with
// `go build`. A benchmark that measures its own process's memory runs the
// server in one, so that the server's buffers are not counted with it.
type Process struct {
	// URL is the node's client URL.
	URL string
	// Pid is the child process's id (its /proc/<pid>/status holds the
	// server's memory).
	Pid int
	// Log is the file the server writes its log to.
	Log    string
	proc   *os.Process
	exited chan error
}

// RunProcess builds nats-server once per process (gobuild.Binary: a
// package whose tests call it removes the binary with testbin.Main),
// starts it as a JetStream node storing in dir, with Options' limits, and
// waits until it accepts connections; it is stopped when the test ends.
// The go command must be on PATH (the test fails if it is not).
func RunProcess(t TB, dir string) *Process {
	t.Helper()
	p, err := startProcess(t.TempDir(), dir)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(p.stop)
	return p
}

func startProcess(work, dir string) (*Process, error) {
	bin, err := gobuild.Binary("github.com/nats-io/nats-server/v2")
	if err != nil {
		return nil, err
	}
	lim := Options(dir).JetStreamLimits
	conf := filepath.Join(work, "nats-server.conf")
	text := fmt.Sprintf(`listen: "127.0.0.1:-1"
ports_file_dir: %s
jetstream {
  store_dir: %s
  limits { batch { max_inflight_per_stream: %d, max_inflight_total: %d } }
}
`, strconv.Quote(work), strconv.Quote(dir), lim.MaxBatchInflightPerStream, lim.MaxBatchInflightTotal)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, err
	}
	p := &Process{Log: filepath.Join(work, "nats-server.log")}
	cmd := exec.Command(bin, "-c", conf, "-l", p.Log)
	// The server dies with the test process even if cleanup never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nats-server: %w", err)
	}
	p.proc, p.Pid, p.exited = cmd.Process, cmd.Process.Pid, make(chan error, 1)
	go func() { p.exited <- cmd.Wait() }()
	ports := filepath.Join(work, fmt.Sprintf("nats-server_%d.ports", p.Pid))
	deadline := time.After(10 * time.Second)
	for {
		var info server.Ports
		if b, err := os.ReadFile(ports); err == nil && json.Unmarshal(b, &info) == nil && len(info.Nats) > 0 {
			p.URL = info.Nats[0]
			return p, nil
		}
		select {
		case err := <-p.exited:
			log, _ := os.ReadFile(p.Log)
			return nil, fmt.Errorf("nats-server exited: %v\n%s", err, log)
		case <-deadline:
			p.kill()
			return nil, errors.New("nats-server not ready after 10s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops the server as an operator would (SIGTERM: it closes its
// store), killing it if it has not exited 10 seconds later.
func (p *Process) stop() {
	_ = p.proc.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

func (p *Process) kill() {
	_ = p.proc.Kill()
	<-p.exited
}
