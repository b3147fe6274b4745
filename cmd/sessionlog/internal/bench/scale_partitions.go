package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// scalePartitions compares a store of one partition with one of three on
// a three-node cluster, stream and buckets R3: ClusterSessions sessions at
// once, each appending one event at a time through a writer (in this
// process, connected to the first node, as one writer replica of a
// fleet). The two clusters run side by side and take turns, round by
// round, so that the machine's load hits both alike. It reports the rate,
// the p99, which node leads each partition and where the CPU of the
// measured rounds went: how many cores the process kept busy, and the CPU
// per event of each node's connections, of each session stream (all its
// replicas), of the buckets, the writer, the load and the runtime (a CPU
// profile of every measured round, split by goroutine labels: cpuSplit).
// All six servers share the machine's cores: a P=3 that keeps them as busy
// as P=1 cannot go faster, whatever its leaders do.
func scalePartitions(ctx context.Context, opt ScaleOptions) (err error) {
	withRole(ctx, "load", func(ctx context.Context) { err = scalePartitionsLabelled(ctx, opt) })
	return err
}

func scalePartitionsLabelled(ctx context.Context, opt ScaleOptions) error {
	tb := &benchTB{}
	defer tb.cleanup()
	type side struct {
		p     int
		st    *logstore.Store
		run   *appendRun
		clust *natstest.Cluster
		cpu   cpuSplit
	}
	var sides []*side
	for _, p := range []int{1, 3} {
		opt.say("partitions: a 3-node cluster, R3, P=%d", p)
		s := &side{p: p}
		if err := tb.run(func() { s.clust = natstest.RunCluster(tb, 3) }); err != nil {
			return err
		}
		// The writer connects over TCP, as a writer replica of a fleet
		// does: an in-process connection would count the node's side of
		// it as the writer's CPU.
		var (
			st   *logstore.Store
			stop func()
			err  error
		)
		withRole(ctx, "writer", func(ctx context.Context) {
			st, stop, err = startWriter(ctx, s.clust.Servers[0], true, logstore.Config{Replicas: 3, Partitions: p})
		})
		if err != nil {
			return err
		}
		tb.Cleanup(stop) // before the cluster's shutdown, registered earlier
		s.st = st
		nc, err := nats.Connect(s.clust.URLs())
		if err != nil {
			return err
		}
		tb.Cleanup(nc.Close)
		cl := client.New(nc)
		s.run = &appendRun{name: fmt.Sprintf("p%d", p), batch: 1, run: func(ctx context.Context, sid string, seq uint64, n int) error {
			return writerRequest(ctx, nc, sid, seq, n)
		}}
		// The partitions' leaders were just spread over the nodes (step
		// downs, then elections): a session's first append may find its
		// partition without a leader for a moment, and nothing stored.
		if err := tb.run(func() {
			for _, name := range st.Streams() {
				s.clust.WaitStreamLeader(name)
			}
		}); err != nil {
			return err
		}
		create := func(ctx context.Context, sid string) error {
			var err error
			for range 20 {
				_, err = cl.Append(ctx, client.AppendRequest{SessionID: sid, ExpectedSeq: client.Seq(0),
					Events: []schema.Envelope{{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)}}})
				if !errors.Is(err, client.ErrNotCommitted) {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			return err
		}
		if err := s.run.init(ctx, opt.ClusterSessions, create); err != nil {
			return fmt.Errorf("P=%d: %w", p, err)
		}
		sides = append(sides, s)
	}
	// Round 0 of each warms up and is not counted.
	for r := 0; r <= opt.ClusterRounds; r++ {
		for _, s := range sides {
			if r > 0 {
				if err := s.cpu.start(); err != nil {
					return err
				}
			}
			err := s.run.round(ctx, opt.ClusterRound, r > 0)
			if r > 0 {
				if perr := s.cpu.stop(); err == nil {
					err = perr
				}
			}
			if err != nil {
				return fmt.Errorf("P=%d: %w", s.p, err)
			}
		}
		opt.say("partitions: round %d of %d done", r, opt.ClusterRounds)
	}
	res := make([]AppendResult, len(sides))
	leaders, split := make([]string, len(sides)), make([]string, len(sides))
	for i, s := range sides {
		var err error
		if res[i], err = s.run.result(); err != nil {
			return fmt.Errorf("P=%d: %w", s.p, err)
		}
		m, err := s.st.PartitionLeaders(ctx)
		if err != nil {
			return err
		}
		leaders[i] = leaderList(m)
		var names []string
		for _, srv := range s.clust.Servers {
			names = append(names, srv.Name())
		}
		split[i] = s.cpu.format(s.clust.Name, names, m, len(s.run.lats)*s.run.batch)
	}
	p1, p3 := res[0], res[1]
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	// Cores kept busy: CPU per event times events per second.
	busy := func(r AppendResult) float64 { return r.CPU.Seconds() * r.EventsPS }
	fmt.Fprintf(opt.Out, "BENCH name=scale-partitions value=%.0f unit=ev/s baseline=%.0f ratio=%.2f p99_p1=%.3f p99_p3=%.3f cpu_us_p1=%.1f cpu_us_p3=%.1f busy_cores_p1=%.2f busy_cores_p3=%.2f cores=%d cpu_split_p1=%s cpu_split_p3=%s sessions=%d nodes=3 replicas=3 leaders=%s leader_p1=%s\n",
		p3.EventsPS, p1.EventsPS, p3.EventsPS/p1.EventsPS, ms(p1.P99), ms(p3.P99),
		us(p1.CPU), us(p3.CPU), busy(p1), busy(p3), runtime.NumCPU(), split[0], split[1],
		opt.ClusterSessions, leaders[1], leaders[0])
	return nil
}

// leaderList is "stream:node,..." of every session stream of m (stream to
// its leader's name), sorted.
func leaderList(m map[string]string) string {
	var out []string
	for stream, node := range m {
		if node == "" {
			node = "none"
		}
		out = append(out, stream+":"+node)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
