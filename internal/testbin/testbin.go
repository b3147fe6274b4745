// Package testbin builds the sessionlog binary once per test process, for
// the end-to-end tests that run it as a real process (and kill it).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// build is one build of the binary, made once per test process.
type build struct {
	once sync.Once
	path string
	err  error
	dir  string
}

var plain, raced build

// Path builds ./cmd/sessionlog into a temporary directory the first time
// it is called and returns the binary's path.
func Path(t testing.TB) string {
	t.Helper()
	return plain.get(t)
}

// RacePath is Path built with the race detector: a race in the process
// prints its report to the process's standard error (and makes a process
// that exits by itself exit 66), so the caller must read that output.
func RacePath(t testing.TB) string {
	t.Helper()
	return raced.get(t, "-race")
}

func (b *build) get(t testing.TB, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "sessionlog-e2e-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "sessionlog")
		args := append(append([]string{"build"}, flags...), "-o", b.path, "github.com/sessionlog/sessionlog/cmd/sessionlog")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %v: %v\n%s", args, err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("%v", b.err)
	}
	return b.path
}

// Main runs the tests and removes the binaries: call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	for _, b := range []*build{&plain, &raced} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
	os.Exit(code)
}

// Node returns the path of node for a test that runs a client package of
// clients/ (dir, relative to the test), failing with how to get what is
// missing when node is not installed or the package has not installed or
// built want (a file under dir, for example "dist/index.js"): the tests
// that run a protocol's own SDK are never skipped.
func Node(t testing.TB, dir, want string) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: this test runs %s in Node (apt-get install nodejs npm; .ci/run does): %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
		t.Fatalf("%s has no %s: run npm ci (and npm run build) in it (make node-deps and .ci/run do): %v", dir, want, err)
	}
	return path
}

// RunNode runs node (Node's path) on args in dir with env added to this
// process's, and returns its standard output; a run that fails fails the
// test with what it printed (its standard error goes to the test's).
func RunNode(t testing.TB, node, dir string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %v: %v: %s", args, err, out)
	}
	return out
}
