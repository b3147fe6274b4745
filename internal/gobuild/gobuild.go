// Package gobuild builds a Go command once per process, for tests and
// benchmarks that run it as a real process: the sessionlog binary
// (internal/testbin) and nats-server (internal/natstest).
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// build is one build of a command, made once per process.
type build struct {
	once sync.Once
	path string
	err  error
	dir  string
}

var (
	mu     sync.Mutex
	builds = map[string]*build{}
)

// Binary runs go build of the command pkg (an import path of this module
// or of one it requires, at the version go.mod names) with flags into a
// temporary directory the first time it is asked for that package and
// flags in this process, and returns the binary's path. The go command
// must be on PATH. RemoveAll removes the binaries.
func Binary(pkg string, flags ...string) (string, error) {
	key := strings.Join(append([]string{pkg}, flags...), " ")
	mu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "sessionlog-bin-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, commandName(pkg))
		args := append(append([]string{"build"}, flags...), "-o", b.path, pkg)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %v: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	return b.path, b.err
}

// commandName is the name go install gives pkg's binary: the last element
// of its path, or the one before it when that is a major version
// ("github.com/nats-io/nats-server/v2": nats-server, which names its
// ports file after its executable).
func commandName(pkg string) string {
	dir, base := path.Split(pkg)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" && dir != "" {
		return path.Base(dir)
	}
	return base
}

// RemoveAll removes every binary Binary built (a process that ends without
// calling it leaves them in the temporary directory).
func RemoveAll() {
	mu.Lock()
	defer mu.Unlock()
	for _, b := range builds {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
}
