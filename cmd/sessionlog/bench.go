package main

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// benchFunc runs one benchmark with the arguments after its name and
// prints BENCH lines to stdout.
type benchFunc func(ctx context.Context, args []string, stdout io.Writer) error

// benches is every `sessionlog bench <name>`; each one's code is in
// bench_<name>.go.
var benches = map[string]benchFunc{
	"answers":   runBenchAnswers,
	"append":    runBenchAppend,
	"catchup":   runBenchCatchup,
	"dashboard": runBenchDashboard,
	"erase":     runBenchErase,
	"fork":      runBenchFork,
	"import":    runBenchImport,
	"load":      runBenchLoad,
	"repair":    runBenchRepair,
	"scale":     runBenchScale,
}

func benchNames() []string {
	names := make([]string, 0, len(benches))
	for n := range benches {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "Usage: sessionlog bench <name> [flags]\n\nBenchmarks: %v\n", benchNames())
		if len(args) == 0 {
			return usageErrorf("bench: name a benchmark")
		}
		return nil
	}
	fn, ok := benches[args[0]]
	if !ok {
		return usageErrorf("bench: unknown benchmark %q (have %v)", args[0], benchNames())
	}
	return fn(ctx, args[1:], stdout)
}
