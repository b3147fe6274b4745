package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// the p99 and which node leads each partition.
func scalePartitions(ctx context.Context, opt ScaleOptions) error {
	tb := &benchTB{}
	defer tb.cleanup()
	type side struct {
		p     int
		st    *logstore.Store
		run   *appendRun
		clust *natstest.Cluster
	}
	var sides []*side
	for _, p := range []int{1, 3} {
		opt.say("partitions: a 3-node cluster, R3, P=%d", p)
		s := &side{p: p}
		if err := tb.run(func() { s.clust = natstest.RunCluster(tb, 3) }); err != nil {
			return err
		}
		st, stop, err := startWriter(ctx, s.clust.Servers[0], false, logstore.Config{Replicas: 3, Partitions: p})
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
			if err := s.run.round(ctx, opt.ClusterRound, r > 0); err != nil {
				return fmt.Errorf("P=%d: %w", s.p, err)
			}
		}
		opt.say("partitions: round %d of %d done", r, opt.ClusterRounds)
	}
	res := make([]AppendResult, len(sides))
	leaders := make([]string, len(sides))
	for i, s := range sides {
		var err error
		if res[i], err = s.run.result(); err != nil {
			return fmt.Errorf("P=%d: %w", s.p, err)
		}
		if leaders[i], err = leaderList(ctx, s.st); err != nil {
			return err
		}
	}
	p1, p3 := res[0], res[1]
	fmt.Fprintf(opt.Out, "BENCH name=scale-partitions value=%.0f unit=ev/s baseline=%.0f ratio=%.2f p99_p1=%.3f p99_p3=%.3f cpu_us_p1=%.1f cpu_us_p3=%.1f sessions=%d nodes=3 replicas=3 leaders=%s leader_p1=%s\n",
		p3.EventsPS, p1.EventsPS, p3.EventsPS/p1.EventsPS, ms(p1.P99), ms(p3.P99),
		float64(p1.CPU)/float64(time.Microsecond), float64(p3.CPU)/float64(time.Microsecond),
		opt.ClusterSessions, leaders[1], leaders[0])
	return nil
}

// leaderList is "stream:node,..." of every session stream, sorted.
func leaderList(ctx context.Context, st *logstore.Store) (string, error) {
	m, err := st.PartitionLeaders(ctx)
	if err != nil {
		return "", err
	}
	var out []string
	for stream, node := range m {
		if node == "" {
			node = "none"
		}
		out = append(out, stream+":"+node)
	}
	slices.Sort(out)
	return strings.Join(out, ","), nil
}
