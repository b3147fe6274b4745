// Package natstest starts real embedded nats-servers with JetStream for
// tests and benchmarks: a single node, or a cluster on loopback with fixed
// route ports and the full route list on every node; and, for a benchmark
// that measures its own process's memory, a single node in a process of
// its own (RunProcess).
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/netproxy"
)

// TB is the part of testing.TB the helpers need (natstest_test.go holds
// testing.TB to it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Options returns embedded-server options for a JetStream node storing in dir.
func Options(dir string) *server.Options {
	return &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  dir,
		// Keep in-flight atomic batches from limiting benchmarks and tests.
		JetStreamLimits: server.JSLimitOpts{MaxBatchInflightPerStream: 1000, MaxBatchInflightTotal: 4000},
	}
}

// NodeLabel is the CPU profiler label every goroutine of a server started
// by Start carries (goroutines inherit their creator's labels): its value
// is "<cluster name>/<server name>", so that a profile of a test or a
// benchmark running several servers in one process tells them apart.
const NodeLabel = "nats_node"

// Start starts a server with opts and waits until it accepts connections.
func Start(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	node := opts.Cluster.Name + "/" + s.Name()
	go pprof.Do(context.Background(), pprof.Labels(NodeLabel, node), func(context.Context) { s.Start() })
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("natstest: server not ready")
	}
	return s, nil
}

// RunServer starts a single JetStream node in a temporary directory; it is
// shut down when the test ends.
func RunServer(t TB) *server.Server {
	t.Helper()
	return RunServerDir(t, storeDir(t))
}

// storeDir returns a new temporary directory for a server's store,
// removed when the test ends, after the servers started on it have
// stopped (its cleanup is registered first, so it runs last). A server's
// JetStream store can still be writing a stream's files for a moment after
// WaitForShutdown returns (seen: "unlinkat .../jetstream/$G/streams:
// directory not empty" from t.TempDir's removal), so the removal is
// tried again until it holds, for up to 10 seconds.
func storeDir(t TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() {
		CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error { return os.RemoveAll(dir) })
	})
	return dir
}

// RunServerDir starts a single JetStream node storing in dir.
func RunServerDir(t TB, dir string) *server.Server {
	t.Helper()
	s, err := Start(Options(dir))
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// Connect connects to s.
func Connect(t TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ConnectThrough connects to s through a pausable proxy: pausing it loses
// the replies of every request in flight, as a paused or crashed node
// loses them; the connection reconnects at once when it resumes.
func ConnectThrough(t TB, s *server.Server) (*nats.Conn, *netproxy.Proxy) {
	t.Helper()
	p, err := netproxy.New(strings.TrimPrefix(s.ClientURL(), "nats://"))
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	nc, err := nats.Connect("nats://"+p.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc, p
}

// JetStream is JetStream on the test's own connection nc, for what a test
// does behind the log store's back: publish a hostile message straight to
// the stream, delete a lease, read a stream's state.
func JetStream(t TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

// StreamNames lists the streams the server holds, sorted (what a test
// compares before and after a start that must create nothing).
func StreamNames(t TB, nc *nats.Conn) []string {
	t.Helper()
	names := JetStream(t, nc).StreamNames(context.Background())
	var out []string
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		t.Fatalf("natstest: stream names: %v", err)
	}
	slices.Sort(out)
	return out
}

// Cluster is a JetStream cluster on loopback.
type Cluster struct {
	Name    string
	Servers []*server.Server
	Opts    []*server.Options
	t       TB
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RunCluster starts n JetStream nodes as one cluster and waits for a meta leader.
func RunCluster(t TB, n int) *Cluster {
	t.Helper()
	var err error
	for try := 0; try < 3; try++ {
		var c *Cluster
		// Route ports are picked free and bound a moment later: another
		// process, or a node's own route dial to a port not bound yet
		// (a loopback connection can take its destination port as its
		// source), may hold one by then. Start again on new ports.
		if c, err = startCluster(t, n); err == nil {
			t.Cleanup(c.Shutdown)
			c.WaitMetaLeader()
			c.WaitPeersCurrent()
			return c
		}
	}
	t.Fatalf("natstest: %v", err)
	return nil
}

func startCluster(t TB, n int) (*Cluster, error) {
	c := &Cluster{Name: fmt.Sprintf("C%d", time.Now().UnixNano()%100000), t: t}
	ports := make([]int, n)
	var routes []*url.URL
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
		u, _ := url.Parse(fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		routes = append(routes, u)
	}
	for i := 0; i < n; i++ {
		o := Options(storeDir(t))
		o.ServerName = fmt.Sprintf("S-%d", i+1)
		o.Cluster.Name = c.Name
		o.Cluster.Host = "127.0.0.1"
		o.Cluster.Port = ports[i]
		o.Routes = routes
		c.Opts = append(c.Opts, o)
		s, err := Start(o)
		if err != nil {
			c.Shutdown()
			return nil, fmt.Errorf("node %d (route port %d): %w", i, ports[i], err)
		}
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for _, s := range c.Servers {
		if s != nil {
			s.Shutdown()
		}
	}
}

// URLs is the client URL list of every running node.
func (c *Cluster) URLs() string {
	var u []string
	for _, s := range c.Servers {
		if s != nil && s.Running() {
			u = append(u, s.ClientURL())
		}
	}
	return strings.Join(u, ",")
}

// WaitMetaLeader waits until the cluster elected a JetStream meta leader.
func (c *Cluster) WaitMetaLeader() {
	c.t.Helper()
	CheckFor(c.t, 20*time.Second, 50*time.Millisecond, func() error {
		for _, s := range c.Servers {
			if s != nil && s.Running() && s.JetStreamIsLeader() {
				return nil
			}
		}
		return fmt.Errorf("no meta leader")
	})
}

// WaitPeersCurrent waits until the meta leader can place replicas on every
// running node. A meta leader is elected by a quorum, before the last
// node has joined: a stream placed on R=n then finds "no suitable peers
// for placement" (10005).
func (c *Cluster) WaitPeersCurrent() {
	c.t.Helper()
	CheckFor(c.t, 20*time.Second, 50*time.Millisecond, func() error {
		running := 0
		for _, s := range c.Servers {
			if s != nil && s.Running() {
				running++
			}
		}
		for _, s := range c.Servers {
			if s == nil || !s.Running() || !s.JetStreamIsLeader() {
				continue
			}
			// The peers placement may use: online, with JetStream, and
			// whose statistics the leader has received.
			if got := len(s.JetStreamClusterPeers()); got < running {
				return fmt.Errorf("meta leader can place on %d of %d nodes", got, running)
			}
			return nil
		}
		return fmt.Errorf("no meta leader")
	})
}

// StreamLeader returns the index of the node leading stream in account $G.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Servers {
		if s != nil && s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until stream has a leader.
func (c *Cluster) WaitStreamLeader(stream string) int {
	c.t.Helper()
	CheckFor(c.t, 20*time.Second, 50*time.Millisecond, func() error {
		if c.StreamLeader(stream) < 0 {
			return fmt.Errorf("stream %s has no leader", stream)
		}
		return nil
	})
	return c.StreamLeader(stream)
}

// Restart starts node i again on its directory.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if s := c.Servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
	o := c.Opts[i].Clone()
	s, err := Start(o)
	if err != nil {
		c.t.Fatalf("natstest: restart node %d: %v", i, err)
	}
	c.Servers[i] = s
}

// CheckFor polls f until it returns nil or the deadline passes.
func CheckFor(t TB, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(every)
	}
	t.Fatalf("natstest: timed out after %v: %v", total, err)
}

// TempDir returns a temporary directory for non-test callers (benchmarks
// run from the command line).
func TempDir(prefix string) (string, func(), error) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
