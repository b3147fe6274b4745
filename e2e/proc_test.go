// Package e2e starts the real sessionlog binary as a process, talks to it
// as any client would (plain NATS requests, HTTP), breaks it with SIGKILL
// and checks DESIGN.md section 9 against what the stream holds.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/testbin"
)

func sessionlogBin(t *testing.T) string { return testbin.Path(t) }

func TestMain(m *testing.M) { testbin.Main(m) }

// upProc is a running `sessionlog up`.
type upProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	DataDir string
	NATSURL string
	HTTPURL string // no trailing slash
	stderr  *lockedBuffer
	done    chan struct{}
	waitErr error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startUp starts `sessionlog up` on dataDir with any free ports (unless
// args say otherwise) and waits until /readyz answers 200.
func startUp(t *testing.T, dataDir string, env []string, args ...string) *upProc {
	t.Helper()
	bin := sessionlogBin(t)
	full := []string{"up", "--data-dir", dataDir}
	if !hasFlag(args, "--nats-listen") {
		full = append(full, "--nats-listen", "127.0.0.1:0")
	}
	if !hasFlag(args, "--http-listen") && !hasEnv(env, "SESSIONLOG_HTTP_LISTEN") {
		full = append(full, "--http-listen", "127.0.0.1:0")
	}
	full = append(full, args...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), env...)
	p := &upProc{t: t, cmd: cmd, DataDir: dataDir, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { p.waitErr = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Stop)
	deadline := time.After(60 * time.Second)
	for p.NATSURL == "" || p.HTTPURL == "" {
		select {
		case l := <-lines:
			if v, ok := strings.CutPrefix(l, "dashboard: "); ok {
				p.HTTPURL = strings.TrimSuffix(v, "/")
			}
			if v, ok := strings.CutPrefix(l, "nats: "); ok {
				p.NATSURL = v
			}
		case <-p.done:
			t.Fatalf("sessionlog up exited: %v\nstderr:\n%s", p.waitErr, tailText(p.stderr.String(), 40))
		case <-deadline:
			t.Fatalf("sessionlog up printed no addresses\nstderr:\n%s", tailText(p.stderr.String(), 40))
		}
	}
	p.waitReady(t)
	return p
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// waitReady polls /readyz until 200.
func (p *upProc) waitReady(t *testing.T) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-p.done:
			t.Fatalf("sessionlog up exited: %v\nstderr:\n%s", p.waitErr, tailText(p.stderr.String(), 40))
		default:
		}
		code, body, err := httpGet(p.HTTPURL + "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("readyz %d: %s", code, body)
		}
		return nil
	})
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *upProc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits (SIGKILL after 20s); used as cleanup.
func (p *upProc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.t.Errorf("sessionlog up did not stop on SIGTERM\nstderr:\n%s", tailText(p.stderr.String(), 40))
		p.Kill()
	}
}

// Connect dials the stack's NATS as a plain client.
func (p *upProc) Connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(p.NATSURL, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("connect %s: %v", p.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// cli runs a sessionlog verb and returns stdout, stderr and exit code.
func cli(t *testing.T, stdin io.Reader, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sessionlogBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("sessionlog %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

func httpGet(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func tailText(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// appendReq is the contract request body on sessions.api.append.
type appendReq struct {
	SessionID   string           `json:"sessionId"`
	ExpectedSeq *uint64          `json:"expectedSeq,omitempty"`
	Holder      string           `json:"holder,omitempty"`
	Events      []map[string]any `json:"events"`
}

// appendReply is the success or error reply.
type appendReply struct {
	SessionID string `json:"sessionId"`
	FirstSeq  uint64 `json:"firstSeq"`
	LastSeq   uint64 `json:"lastSeq"`
	StreamSeq uint64 `json:"streamSeq"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code       string  `json:"code"`
		Message    string  `json:"message"`
		CurrentSeq *uint64 `json:"currentSeq"`
	} `json:"error"`
}

// request sends one append as a plain NATS request.
func request(nc *nats.Conn, req appendReq, timeout time.Duration) (appendReply, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return appendReply{}, err
	}
	m, err := nc.Request("sessions.api.append", b, timeout)
	if err != nil {
		return appendReply{}, err
	}
	var r appendReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return appendReply{}, fmt.Errorf("reply %q: %w", m.Data, err)
	}
	return r, nil
}

func u64(v uint64) *uint64 { return &v }

func created(eventID string) map[string]any {
	return map[string]any{"eventId": eventID, "type": "session/created", "data": map[string]any{"title": "e2e"}}
}

func userMsg(eventID, content string) map[string]any {
	return map[string]any{"eventId": eventID, "type": "message/user", "data": map[string]any{"content": content}}
}

// mustAppend appends and fails the test on any error reply.
// must stops the test at err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t *testing.T, nc *nats.Conn, req appendReq) appendReply {
	t.Helper()
	r, err := request(nc, req, 10*time.Second)
	if err != nil {
		t.Fatalf("append %s: %v", req.SessionID, err)
	}
	if r.Error != nil {
		t.Fatalf("append %s: %s: %s", req.SessionID, r.Error.Code, r.Error.Message)
	}
	return r
}

// tailProc is a running long-lived verb.
type tailProc struct {
	cmd    *exec.Cmd
	stdout io.Reader
}

func execTail(ctx context.Context, t *testing.T, args ...string) *tailProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, sessionlogBin(t), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tp := &tailProc{cmd: cmd, stdout: out}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return tp
}

// stop ends the verb with SIGINT and expects a clean exit.
func (p *tailProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, p.stdout)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("tail after SIGINT: %v", err)
	}
}
