package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// roleLabel is the CPU profiler label of the goroutines a benchmark runs
// beside its servers (which carry natstest.NodeLabel): "writer" for the
// writer service, "load" for the bench's clients.
const roleLabel = "bench_role"

// withRole runs f with every goroutine it starts labelled role.
func withRole(ctx context.Context, role string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(roleLabel, role), f)
}

// cpuSplit adds up where this process's CPU went while it profiled. The
// servers label their own goroutines: a stream's (its Raft group, its
// store, its monitor) carry the label "stream" with the stream's name,
// whatever node runs them; what a node runs outside any stream (its
// client and route connections: receiving, routing, delivering) keeps
// natstest.NodeLabel. Then the bench's roles (roleLabel), and "runtime"
// for what no label names (the garbage collector's workers, timers).
type cpuSplit struct {
	buf bytes.Buffer
	by  map[string]time.Duration
}

// start starts the CPU profiler; stop must follow.
func (c *cpuSplit) start() error {
	c.buf.Reset()
	return pprof.StartCPUProfile(&c.buf)
}

// stop stops the profiler and adds its samples to the split.
func (c *cpuSplit) stop() error {
	pprof.StopCPUProfile()
	p, err := profile.Parse(&c.buf)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 {
		return fmt.Errorf("cpu profile: no cpu sample type in %v", p.SampleType)
	}
	if c.by == nil {
		c.by = map[string]time.Duration{}
	}
	for _, s := range p.Sample {
		c.by[sampleKey(s.Label)] += time.Duration(s.Value[cpu])
	}
	return nil
}

// sampleKey is where a sample's CPU counts: "stream:<name>" (every KV
// bucket's stream as "kv"), "node:<cluster>/<server>", a role, or
// "runtime".
func sampleKey(l map[string][]string) string {
	switch {
	case len(l["stream"]) > 0 && strings.HasPrefix(l["stream"][0], "KV_"):
		return "kv"
	case len(l["stream"]) > 0:
		return "stream:" + l["stream"][0]
	case len(l[natstest.NodeLabel]) > 0:
		return "node:" + l[natstest.NodeLabel][0]
	case len(l[roleLabel]) > 0:
		return l[roleLabel][0]
	}
	return "runtime"
}

// format is the split in µs per event of n events: each node of cluster
// (servers, and any other the profile names) outside streams ("S-1:<µs>"), each session stream of leaders (stream to
// its leader's name) on all its replicas ("SESSIONS-0@S-2:<µs>"), the KV
// buckets' streams, the writer, the load, the runtime, and "other" for
// what is left (the servers of any other cluster in the process).
func (c *cpuSplit) format(cluster string, servers []string, leaders map[string]string, n int) string {
	us := func(d time.Duration) string {
		return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond)/float64(max(n, 1)))
	}
	rest := maps.Clone(c.by)
	take := func(key string) time.Duration { d := rest[key]; delete(rest, key); return d }
	var out []string
	// Every server of the cluster, one the profile caught no sample of
	// too (0.0: a short run on a loaded machine may catch none).
	nodes := slices.Clone(servers)
	for k := range c.by {
		if name, ok := strings.CutPrefix(k, "node:"+cluster+"/"); ok && !slices.Contains(nodes, name) {
			nodes = append(nodes, name)
		}
	}
	slices.Sort(nodes)
	for _, name := range nodes {
		out = append(out, name+":"+us(take("node:"+cluster+"/"+name)))
	}
	for _, stream := range slices.Sorted(maps.Keys(leaders)) {
		out = append(out, stream+"@"+leaders[stream]+":"+us(take("stream:"+stream)))
	}
	for _, k := range []string{"kv", "writer", "load", "runtime"} {
		out = append(out, k+":"+us(take(k)))
	}
	var other time.Duration
	for _, d := range rest {
		other += d
	}
	return strings.Join(append(out, "other:"+us(other)), ",")
}
