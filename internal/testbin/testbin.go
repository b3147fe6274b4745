// Package testbin builds the sessionlog binary once per test process, for
// the end-to-end tests that run it as a real process (and kill it), and
// finds the tools the tests of clients/ need.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gobuild"
)

const sessionlogPkg = "github.com/sessionlog/sessionlog/cmd/sessionlog"

// Path builds ./cmd/sessionlog into a temporary directory the first time
// it is called and returns the binary's path.
func Path(t testing.TB) string {
	t.Helper()
	return Build(t, sessionlogPkg)
}

// RacePath is Path built with the race detector: a race in the process
// prints its report to the process's standard error (and makes a process
// that exits by itself exit 66), so the caller must read that output.
func RacePath(t testing.TB) string {
	t.Helper()
	return Build(t, sessionlogPkg, "-race")
}

// Build builds the command pkg with flags once per test process
// (gobuild.Binary) and returns the binary's path; a build that fails
// fails the test.
func Build(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	path, err := gobuild.Binary(pkg, flags...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return path
}

// Main runs the tests and removes the binaries they built: call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	gobuild.RemoveAll()
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
