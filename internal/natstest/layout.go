package natstest

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Layout is where a test's store lives: Partitions session streams
// (DESIGN.md section 11) on Nodes servers, one node or a cluster whose
// every stream has a replica on each node.
type Layout struct {
	Partitions int
	Nodes      int
}

// Layouts are the layouts each contract behaviour is tested on: one
// stream on one node, three partitions on one node, and three partitions
// on a 3-node cluster (R3), where every partition is its own Raft group.
func Layouts() []Layout {
	return []Layout{{Partitions: 1, Nodes: 1}, {Partitions: 3, Nodes: 1}, {Partitions: 3, Nodes: 3}}
}

// String names the layout's subtest: P1, P3, P3R3.
func (l Layout) String() string {
	if l.Replicas() == 1 {
		return fmt.Sprintf("P%d", l.Partitions)
	}
	return fmt.Sprintf("P%dR%d", l.Partitions, l.Replicas())
}

// Replicas is the replica count of the store's streams and buckets.
func (l Layout) Replicas() int { return max(l.Nodes, 1) }

// Subtests is what ForEachLayout needs of a *testing.T (T is *testing.T):
// the package names no testing type, so the sessionlog binary, whose
// benchmarks start servers through it, does not link package testing.
type Subtests[T any] interface {
	Helper()
	Run(name string, f func(T)) bool
}

// ForEachLayout runs f as one subtest per layout given, or per layout of
// Layouts when none is.
func ForEachLayout[T Subtests[T]](t T, f func(t T, l Layout), layouts ...Layout) {
	t.Helper()
	if len(layouts) == 0 {
		layouts = Layouts()
	}
	for _, l := range layouts {
		t.Run(l.String(), func(t T) { f(t, l) })
	}
}

// ForEachSealing runs f as two subtests: "plain", whose stores write
// bodies as they are, and "sealed", whose stores seal them
// (logstore.Config.SealBodies, docs/adr/011-sealed-bodies.md). In a
// build with the tag sealforced (SealForced) every store seals, so there
// is no plain run: only "sealed" runs.
func ForEachSealing[T Subtests[T]](t T, f func(t T, sealed bool)) {
	t.Helper()
	if !SealForced {
		t.Run("plain", func(t T) { f(t, false) })
	}
	t.Run("sealed", func(t T) { f(t, true) })
}

// Deployment is the running servers of a layout.
type Deployment struct {
	Layout
	// URL lists every node's client URL.
	URL string
	// Server is the only node, or the first node of the cluster.
	Server *server.Server
	// Cluster is nil on one node.
	Cluster *Cluster
	t       TB
}

// RunLayout starts the servers of l, stopped when the test ends: one node
// in a temporary directory, or a cluster with a meta leader that can place
// a replica on every node.
func RunLayout(t TB, l Layout) *Deployment {
	t.Helper()
	d := &Deployment{Layout: l, t: t}
	if l.Replicas() == 1 {
		d.Server = RunServer(t)
		d.URL = d.Server.ClientURL()
		return d
	}
	d.Cluster = RunCluster(t, l.Replicas())
	d.Server = d.Cluster.Servers[0]
	d.URL = d.Cluster.URLs()
	return d
}

// Connect connects to the deployment (every node's URL).
func (d *Deployment) Connect(opts ...nats.Option) *nats.Conn {
	d.t.Helper()
	nc, err := nats.Connect(d.URL, opts...)
	if err != nil {
		d.t.Fatalf("natstest: connect: %v", err)
	}
	d.t.Cleanup(nc.Close)
	return nc
}

// WaitLeaders waits until every stream the servers hold (the session
// streams and the buckets) has a leader and every replica of it is
// current: what a test provisioned is then writable and readable on any
// node. Nothing to wait for on one node.
func (d *Deployment) WaitLeaders(nc *nats.Conn) {
	d.t.Helper()
	if d.Cluster == nil {
		return
	}
	// Listing streams needs a meta leader: after a node stops there may
	// be none until the nodes left elect one.
	d.Cluster.WaitMetaLeader()
	d.Cluster.WaitStreamsCurrent(StreamNames(d.t, nc)...)
}

// WaitStreamsCurrent waits until each stream has a leader and is current
// on every running node.
func (c *Cluster) WaitStreamsCurrent(streams ...string) {
	c.t.Helper()
	CheckFor(c.t, 20*time.Second, 50*time.Millisecond, func() error {
		for _, name := range streams {
			if c.StreamLeader(name) < 0 {
				return fmt.Errorf("stream %s has no leader", name)
			}
			for i, s := range c.Servers {
				if s != nil && s.Running() && !s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, name) {
					return fmt.Errorf("stream %s is not current on node %d", name, i)
				}
			}
		}
		return nil
	})
}
