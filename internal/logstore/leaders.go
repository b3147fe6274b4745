package logstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// On a cluster every partition is a Raft group whose leader orders its
// appends: partitions gain nothing while one node leads them all. The
// process that provisions the store spreads their leaders over the nodes
// (DESIGN.md section 11); operators see and move them with `nats stream
// report` and `nats stream cluster step-down` (deploy/k8s/README.md).

// PartitionLeaders returns the server leading each session stream ("" for
// a stream with no leader now); nil on a single server.
func (s *Store) PartitionLeaders(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range s.Streams() {
		ci, err := s.clusterInfo(ctx, name)
		if err != nil || ci == nil {
			return nil, err
		}
		out[name] = ci.Leader
	}
	return out, nil
}

func (s *Store) clusterInfo(ctx context.Context, stream string) (*jetstream.ClusterInfo, error) {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("logstore: stream %s: %w", stream, err)
	}
	return st.CachedInfo().Cluster, nil
}

// SpreadLeaders asks each partition whose leader also leads another one
// to step down in favour of a current replica that leads fewer partitions
// (nats-server's preferred placement), and waits until each one moved has
// its new leader. It returns how many it moved. Nothing to do on a single
// server or with one partition.
//
// The wait matters: a stream in election answers no request, and one
// sent then (a tail read) is not answered once the leader is elected
// either: it waits its whole timeout. Open spreads the leaders, so a
// store it returns has every partition led.
func (s *Store) SpreadLeaders(ctx context.Context) (int, error) {
	moved, err := s.spreadLeaders(ctx)
	if len(moved) > 0 {
		if werr := s.waitLeaders(ctx, moved); err == nil {
			err = werr
		}
	}
	return len(moved), err
}

// leaderWait bounds how long SpreadLeaders waits for the partitions it
// moved to elect their leaders; leaderPoll is how often it looks.
const (
	leaderWait = 30 * time.Second
	leaderPoll = 50 * time.Millisecond
)

// waitLeaders waits until each of streams reports a leader.
func (s *Store) waitLeaders(ctx context.Context, streams []string) error {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	for {
		var leaderless []string
		for _, name := range streams {
			ci, err := s.clusterInfo(ctx, name)
			if err != nil || ci == nil || ci.Leader == "" {
				leaderless = append(leaderless, name)
			}
		}
		if len(leaderless) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("logstore: no leader elected after a step-down: %v: %w", leaderless, ctx.Err())
		case <-time.After(leaderPoll):
		}
		streams = leaderless
	}
}

// spreadLeaders is SpreadLeaders' step-downs: the streams it moved.
func (s *Store) spreadLeaders(ctx context.Context) ([]string, error) {
	streams := s.Streams()
	if len(streams) < 2 {
		return nil, nil
	}
	infos := make([]*jetstream.ClusterInfo, len(streams))
	led := map[string]int{}
	for i, name := range streams {
		ci, err := s.clusterInfo(ctx, name)
		if err != nil || ci == nil || len(ci.Replicas) == 0 {
			return nil, err
		}
		infos[i] = ci
		led[ci.Leader]++
		for _, p := range ci.Replicas {
			led[p.Name] += 0
		}
	}
	var moved []string
	for i, ci := range infos {
		if ci.Leader == "" || led[ci.Leader] <= 1 {
			continue
		}
		to := ""
		for _, p := range ci.Replicas {
			if p.Current && !p.Offline && led[p.Name] < led[ci.Leader]-1 && (to == "" || led[p.Name] < led[to]) {
				to = p.Name
			}
		}
		if to == "" {
			continue
		}
		if err := s.stepDown(ctx, streams[i], to); err != nil {
			return moved, err
		}
		led[ci.Leader]--
		led[to]++
		moved = append(moved, streams[i])
	}
	return moved, nil
}

type stepDownRequest struct {
	Placement struct {
		Preferred string `json:"preferred"`
	} `json:"placement"`
}

type stepDownResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Success bool                `json:"success"`
}

func (s *Store) stepDown(ctx context.Context, stream, preferred string) error {
	var req stepDownRequest
	req.Placement.Preferred = preferred
	b, _ := json.Marshal(req)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	reply, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, b)
	if err != nil {
		return fmt.Errorf("logstore: step down %s: %w", stream, err)
	}
	var resp stepDownResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return fmt.Errorf("logstore: step down %s: %w", stream, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("logstore: step down %s to %s: %w", stream, preferred, resp.Error)
	}
	return nil
}
