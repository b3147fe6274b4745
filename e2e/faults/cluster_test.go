// Package faults runs sessionlog on a 3-node JetStream cluster and breaks
// it: the stream leader shut down gracefully, a node killed with SIGKILL, a
// node partitioned from the other two, each service killed with SIGKILL.
// A fleet of simulated agents appends through the writer the whole time
// and records what it was told; a checker then holds that history against
// the final stream (DESIGN.md section 9).
//
// Every NATS node and every service runs as a child process of the test
// binary (TestMain re-executes it with SESSIONLOG_FAULTS_CHILD set), so a
// crash is a real SIGKILL of a real process. Routes between nodes go
// through pausable proxies (internal/netproxy), one per ordered pair.
package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/faultfs"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/netproxy"
	"github.com/sessionlog/sessionlog/internal/testbin"
)

const (
	faultChildEnv = "SESSIONLOG_FAULTS_CHILD"
	faultNodes    = 3
	// faultMaxLag is how many entries a follower may trail and still
	// count as caught up.
	faultMaxLag = 50
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(faultChildEnv); spec != "" {
		os.Exit(faultChildMain(spec))
	}
	testbin.Main(m)
}

// faultSpec tells a child process what to run.
type faultSpec struct {
	Role string         `json:"role"` // "nats" or a service name
	Node *faultNodeSpec `json:"node,omitempty"`
	Svc  *faultSvcSpec  `json:"svc,omitempty"`
}

type faultNodeSpec struct {
	Name       string   `json:"name"`
	Cluster    string   `json:"cluster"`
	Dir        string   `json:"dir"`
	ClientPort int      `json:"clientPort"`
	RoutePort  int      `json:"routePort"`
	Routes     []string `json:"routes"`
	// SyncAlways: fsync before every acknowledgement (nats-server's
	// sync_interval: always); off, the engine's lazy default (every 2 min).
	SyncAlways bool `json:"syncAlways,omitempty"`
}

type faultSvcSpec struct {
	Instance string        `json:"instance"`
	URLs     string        `json:"urls"`
	DataDir  string        `json:"dataDir"`
	HTTPAddr string        `json:"httpAddr"`
	LeaseTTL time.Duration `json:"leaseTTL"`
	Grace    time.Duration `json:"grace"`
	Sweep    time.Duration `json:"sweep"`
}

func faultChildMain(raw string) int {
	var spec faultSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "faults child: bad spec: %v\n", err)
		return 2
	}
	var err error
	if spec.Role == "nats" {
		err = faultRunNode(spec.Node)
	} else {
		err = faultRunService(spec.Role, spec.Svc)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults child %s: %v\n", spec.Role, err)
		return 1
	}
	return 0
}

// faultNodeOptions are the options of one cluster node. Routes point at
// proxies; the advertised route address is unreachable so that no node
// learns a direct path around the proxies through route gossip (implicit
// routes dial the advertised address once and give up).
func faultNodeOptions(n *faultNodeSpec) *server.Options {
	o := natstest.Options(n.Dir)
	o.ServerName = n.Name
	o.SyncAlways = true // as deploy/k8s/nats.conf ships
	o.Port = n.ClientPort
	o.NoLog = false
	o.Cluster.Name = n.Cluster
	o.Cluster.Host = "127.0.0.1"
	o.Cluster.Port = n.RoutePort
	o.Cluster.Advertise = "127.0.0.1:1"
	// A black-holed route is noticed by missed pings: keep that short so
	// a partition is seen in seconds, as the Raft timers see it.
	o.Cluster.PingInterval = 500 * time.Millisecond
	o.Cluster.MaxPingsOut = 3
	for _, r := range n.Routes {
		o.Routes = append(o.Routes, server.RoutesFromStr(r)...)
	}
	o.SyncAlways = n.SyncAlways
	o.LameDuckDuration = 2 * time.Second
	o.LameDuckGracePeriod = 500 * time.Millisecond
	return o
}

func faultRunNode(n *faultNodeSpec) error {
	o := faultNodeOptions(n)
	s, err := server.NewServer(o)
	if err != nil {
		return err
	}
	s.ConfigureLogger()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		return errors.New("server not ready")
	}
	<-sig
	// Graceful: lame duck moves Raft leadership away, then shuts down.
	s.LameDuckShutdown()
	s.WaitForShutdown()
	return nil
}

// faultProc is a child process.
type faultProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// faultStart starts a child running spec; its output goes to logPath.
func faultStart(t testing.TB, name string, spec faultSpec, logPath string) *faultProc {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), faultChildEnv+"="+string(b), "GOTRACEBACK=all")
	return faultStartCmd(t, name, cmd, logPath)
}

// faultStartCmd starts cmd as a child; its output goes to logPath.
func faultStartCmd(t testing.TB, name string, cmd *exec.Cmd, logPath string) *faultProc {
	t.Helper()
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lf, "\n==== %s start %s\n", name, time.Now().Format(time.RFC3339Nano))
	cmd.Stdout, cmd.Stderr = lf, lf
	// The child dies with the test process even if cleanup never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &faultProc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	return p
}

func (p *faultProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *faultProc) kill() {
	if p == nil || !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to d before killing.
func (p *faultProc) stop(d time.Duration) error {
	if p == nil || !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		p.kill()
		return fmt.Errorf("%s did not stop within %v", p.name, d)
	}
}

// faultCluster is three nats-server child processes with a proxy on every
// route.
type faultCluster struct {
	t     testing.TB
	dir   string
	specs []*faultNodeSpec
	procs []*faultProc
	// proxies[i][j] carries the routes node i dials to node j.
	proxies [faultNodes][faultNodes]*netproxy.Proxy
	admin   *nats.Conn
	js      jetstream.JetStream
	mu      sync.Mutex
	// streams are the session streams of the store (its partitions), set
	// once the harness provisioned it.
	streams []string
	// fss are the fault filesystems under the nodes' store directories
	// (faultClusterOpts.FaultFS), nil otherwise.
	fss []*faultfs.FS
}

// faultSync is a cluster's fsync policy, always explicit.
type faultSync string

const (
	// faultSyncAlways: fsync before every acknowledgement, what
	// sessionlog ships (sync_interval: always).
	faultSyncAlways faultSync = "always"
	// faultSyncInterval: the engine's lazy default (fsync every 2 min).
	faultSyncInterval faultSync = "interval"
)

// faultClusterOpts shape a cluster.
type faultClusterOpts struct {
	Sync faultSync
	// FaultFS mounts a fault filesystem (internal/faultfs) over every
	// node's store directory: the power-loss, corruption and disk-full
	// faults need it.
	FaultFS bool
}

func faultPort(t testing.TB) int {
	t.Helper()
	p, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newFaultCluster(t testing.TB, dir string, opts faultClusterOpts) *faultCluster {
	t.Helper()
	if opts.Sync != faultSyncAlways && opts.Sync != faultSyncInterval {
		t.Fatalf("cluster sync policy %q: want always or interval", opts.Sync)
	}
	c := &faultCluster{t: t, dir: dir}
	name := fmt.Sprintf("FAULTS%d", time.Now().UnixNano()%100000)
	// The nodes' ports stay bound until the proxies have theirs: a port
	// freed at once could be handed to a proxy, and the node started on
	// it would exit.
	var held []net.Listener
	hold := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port
	}
	for i := 0; i < faultNodes; i++ {
		c.specs = append(c.specs, &faultNodeSpec{
			Name: fmt.Sprintf("N-%d", i+1), Cluster: name,
			Dir:        filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			ClientPort: hold(), RoutePort: hold(),
			SyncAlways: opts.Sync == faultSyncAlways,
		})
		if opts.FaultFS {
			fs, err := faultfs.Mount(c.specs[i].Dir, c.specs[i].Dir+".disk")
			if err != nil {
				t.Fatalf("fault filesystem for node %d (needs root and /dev/fuse): %v", i+1, err)
			}
			c.fss = append(c.fss, fs)
		}
	}
	for i := range c.specs {
		for j := range c.specs {
			if i == j {
				continue
			}
			p, err := netproxy.New(fmt.Sprintf("127.0.0.1:%d", c.specs[j].RoutePort))
			if err != nil {
				t.Fatal(err)
			}
			c.proxies[i][j] = p
			c.specs[i].Routes = append(c.specs[i].Routes, fmt.Sprintf("nats-route://%s", p.Addr()))
		}
	}
	for _, l := range held {
		l.Close()
	}
	c.procs = make([]*faultProc, faultNodes)
	for i := range c.specs {
		c.Start(i)
	}
	t.Cleanup(c.shutdown)
	var err error
	c.admin, err = nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.js, _ = jetstream.New(c.admin, jetstream.WithDefaultTimeout(3*time.Second))
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.js.AccountInfo(ctx)
		return err
	})
	return c
}

func (c *faultCluster) shutdown() {
	if c.admin != nil {
		c.admin.Close()
	}
	for _, p := range c.procs {
		p.kill()
	}
	for _, fs := range c.fss {
		if err := fs.Unmount(); err != nil {
			c.t.Errorf("%v", err)
		}
	}
	for i := range c.proxies {
		for _, p := range c.proxies[i] {
			if p != nil {
				p.Close()
			}
		}
	}
}

// URL is node i's client URL (fixed across restarts).
func (c *faultCluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.specs[i].ClientPort)
}

// URLs is the full server list, starting at node first.
func (c *faultCluster) URLsFrom(first int) string {
	var u []string
	for k := 0; k < faultNodes; k++ {
		u = append(u, c.URL((first+k)%faultNodes))
	}
	return strings.Join(u, ",")
}

// URLs is the full server list.
func (c *faultCluster) URLs() string { return c.URLsFrom(0) }

// Start starts node i on its directory and waits until it takes clients.
func (c *faultCluster) Start(i int) {
	c.t.Helper()
	c.procs[i] = faultStart(c.t, c.specs[i].Name, faultSpec{Role: "nats", Node: c.specs[i]}, filepath.Join(c.dir, c.specs[i].Name+".log"))
	natstest.CheckFor(c.t, 20*time.Second, 50*time.Millisecond, func() error {
		if !c.procs[i].running() {
			return fmt.Errorf("node %s exited: %v\n%s", c.specs[i].Name, c.procs[i].err, faultLogTail(filepath.Join(c.dir, c.specs[i].Name+".log"), 3000))
		}
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.specs[i].ClientPort), time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// Kill stops node i with SIGKILL.
func (c *faultCluster) Kill(i int) { c.procs[i].kill() }

// PowerLoss cuts node i's power: SIGKILL, then every write it had not
// fsynced is dropped from its disk. It stays down until Start.
func (c *faultCluster) PowerLoss(i int) faultfs.LossStats {
	c.t.Helper()
	c.procs[i].kill()
	ls, err := c.fss[i].PowerLoss()
	if err != nil {
		c.t.Fatalf("power loss of node %d: %v", i+1, err)
	}
	for _, p := range ls.Paths {
		c.t.Logf("power loss of %s: %s", c.specs[i].Name, p)
	}
	return ls
}

// PowerLossAll cuts the power of every node at once, drops what each had
// not fsynced and starts them again; it says what each lost.
func (c *faultCluster) PowerLossAll() string {
	c.t.Helper()
	for i := range faultNodes {
		_ = c.procs[i].cmd.Process.Kill()
	}
	var parts []string
	for i := range faultNodes {
		parts = append(parts, c.specs[i].Name+":"+c.PowerLoss(i).String())
	}
	for i := range faultNodes {
		c.Start(i)
	}
	return strings.Join(parts, ",")
}

// Pause freezes node i (SIGSTOP); Resume thaws it (SIGCONT).
func (c *faultCluster) Pause(i int)  { _ = c.procs[i].cmd.Process.Signal(syscall.SIGSTOP) }
func (c *faultCluster) Resume(i int) { _ = c.procs[i].cmd.Process.Signal(syscall.SIGCONT) }

// Stop shuts node i down gracefully (lame duck mode).
func (c *faultCluster) Stop(i int) error { return c.procs[i].stop(20 * time.Second) }

// Isolate cuts node i off from the other two.
func (c *faultCluster) Isolate(i int) {
	for j := 0; j < faultNodes; j++ {
		if j != i {
			c.proxies[i][j].Pause()
			c.proxies[j][i].Pause()
		}
	}
}

// Heal joins node i again.
func (c *faultCluster) Heal(i int) {
	for j := 0; j < faultNodes; j++ {
		if j != i {
			c.proxies[i][j].Resume()
			c.proxies[j][i].Resume()
		}
	}
}

// NodeIndex maps a server name to its index.
func (c *faultCluster) NodeIndex(name string) int {
	for i, s := range c.specs {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// streamInfo asks for the stream's info (from its leader).
func (c *faultCluster) streamInfo(stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return st.Info(ctx)
}

// StreamLeader is the index of the node leading stream, waiting for one.
func (c *faultCluster) StreamLeader(stream string) int {
	c.t.Helper()
	leader := -1
	natstest.CheckFor(c.t, 30*time.Second, 100*time.Millisecond, func() error {
		info, err := c.streamInfo(stream)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("stream %s has no leader", stream)
		}
		leader = c.NodeIndex(info.Cluster.Leader)
		return nil
	})
	return leader
}

// WaitHealthy waits until every node runs, every stream and bucket of
// sessionlog has a leader and all its replicas are current: a fault is
// over only when the cluster could lose another node.
func (c *faultCluster) WaitHealthy(d time.Duration) error {
	start := time.Now()
	deadline := start.Add(d)
	var last error
	logged := start
	for time.Now().Before(deadline) {
		last = c.healthy()
		if last == nil {
			return nil
		}
		if time.Since(logged) > 5*time.Second {
			c.t.Logf("waiting %v for the cluster: %v", time.Since(start).Round(time.Second), last)
			logged = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster not healthy after %v: %w", d, last)
}

func (c *faultCluster) healthy() error {
	for i, p := range c.procs {
		if !p.running() {
			return fmt.Errorf("node %d is down", i)
		}
	}
	for _, stream := range append(slices.Clone(c.streams), "KV_"+logstore.LeaseBucket, "KV_"+logstore.ClaimBucket, "KV_SESSION_FORKS") {
		info, err := c.streamInfo(stream)
		if err != nil {
			return fmt.Errorf("%s: %w", stream, err)
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("%s: no leader", stream)
		}
		if len(info.Cluster.Replicas) != faultNodes-1 {
			return fmt.Errorf("%s: %d peers", stream, len(info.Cluster.Replicas))
		}
		for _, r := range info.Cluster.Replicas {
			// Under steady writes a healthy follower is a few entries
			// behind at any instant: "current" flickers. A replica that
			// answers and is close behind is whole.
			if r.Offline || r.Active > 2*time.Second || (!r.Current && r.Lag > faultMaxLag) {
				return fmt.Errorf("%s: replica %s not current (lag %d, active %v ago)", stream, r.Name, r.Lag, r.Active)
			}
		}
	}
	return nil
}

// faultHTTPReady polls a child's /readyz.
func faultHTTPReady(addr string) error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + addr + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("readyz %s: %s: %s", addr, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// faultLogTail is the last n bytes of a child's log.
func faultLogTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
