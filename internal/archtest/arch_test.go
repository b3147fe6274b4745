package archtest

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	module    = "github.com/sessionlog/sessionlog"
	jetstream = "github.com/nats-io/nats.go/jetstream"
	// pebble is the Pebble module: every major version and subpackage
	// import path starts with it.
	pebble = "github.com/cockroachdb/pebble"
	// pebbleHome is the one package that may import Pebble: the
	// projector's store. The fold writes through its batches, the HTTP
	// side reads through its snapshots, tools open it as a store.
	pebbleHome = "services/projector/store"
)

// jetstreamAllowed are the directories (with everything under them) whose
// code may use the JetStream API: the one adapter, and the test and
// benchmark kits.
var jetstreamAllowed = []string{"internal/logstore", "internal/natstest", "cmd/sessionlog/internal/bench", "e2e"}

// jetstreamExceptions are the files that may import the JetStream API
// outside the allowed set (DESIGN.md section 1: only internal/logstore
// may). It is empty, and a file that joins it needs a reason written here.
var jetstreamExceptions = []string{}

// pebbleExceptions are the files outside pebbleHome that may import
// Pebble. It is empty, and a file that joins it needs a reason written
// here.
var pebbleExceptions = []string{}

// goFile is one Go file of the module and what it imports.
type goFile struct {
	path    string // slash-separated, relative to the module root
	imports []string
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// sources lists the module's non-test Go files: what a package's users
// build (go list -deps sees the same). Test files are test kits.
func sources(t *testing.T) []goFile { return goFiles(t, false) }

// goFiles lists the module's Go files, test files too when tests is set.
func goFiles(t *testing.T, tests bool) []goFile {
	t.Helper()
	top := root(t)
	var out []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != top && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if p != top {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || !tests && strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, p)
		g := goFile{path: filepath.ToSlash(rel)}
		for _, im := range f.Imports {
			v, _ := strconv.Unquote(im.Path.Value)
			g.imports = append(g.imports, v)
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d Go files under %s", len(out), top)
	}
	return out
}

func under(path, dir string) bool { return strings.HasPrefix(path, dir+"/") }

// fileRule reads one Go file: the names in it that break a rule, and
// whether it declares what its package must declare once.
type fileRule func(fset *token.FileSet, name string, src any) (bad []string, declares bool, err error)

// checkPackage runs rule over each non-test Go file of the package in dir
// (a path on disk), giving report each name that breaks it with its
// file: how many files it read, and whether any declares what the
// package must declare.
func checkPackage(t *testing.T, fset *token.FileSet, dir string, rule fileRule, report func(file, bad string)) (files int, declares bool) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad, d, err := rule(fset, p, src)
		if err != nil {
			t.Fatal(err)
		}
		files++
		declares = declares || d
		for _, b := range bad {
			report(p, b)
		}
	}
	return files, declares
}

func jetstreamAllowedFor(path string) bool {
	for _, d := range jetstreamAllowed {
		if under(path, d) {
			return true
		}
	}
	// The benchmark harness of the command.
	return under(path, "cmd/sessionlog") && strings.HasPrefix(filepath.Base(path), "bench")
}

// Only internal/logstore (and the test and benchmark kits) may use the
// JetStream API; every other package reaches the log through it.
func TestJetStreamOnlyInLogstore(t *testing.T) {
	importing := map[string]bool{}
	for _, f := range sources(t) {
		if !slices.Contains(f.imports, jetstream) {
			continue
		}
		importing[f.path] = true
		if !jetstreamAllowedFor(f.path) && !slices.Contains(jetstreamExceptions, f.path) {
			t.Errorf("%s imports %s: only internal/logstore may; add a method to the store instead", f.path, jetstream)
		}
	}
	for _, p := range jetstreamExceptions {
		if !importing[p] {
			t.Errorf("%s no longer imports %s (or is gone): remove it from jetstreamExceptions", p, jetstream)
		}
	}
}

func importsPebble(im string) bool { return im == pebble || strings.HasPrefix(im, pebble+"/") }

func pebbleAllowedFor(path string) bool { return under(path, pebbleHome) }

// Only the projector's store imports Pebble, test files included: the
// rest of the projector reads through store.Snapshot and writes through
// store.Batch, so what a view key holds and how it is read is decided in
// one package (a test that needs to damage the store calls the store's
// own hooks).
func TestPebbleOnlyInProjectorStore(t *testing.T) {
	importing := map[string]bool{}
	home := 0
	for _, f := range goFiles(t, true) {
		i := slices.IndexFunc(f.imports, importsPebble)
		if i < 0 {
			continue
		}
		importing[f.path] = true
		switch {
		case pebbleAllowedFor(f.path):
			home++
		case !slices.Contains(pebbleExceptions, f.path):
			t.Errorf("%s imports %s: only %s may; add a method to the store instead", f.path, f.imports[i], pebbleHome)
		}
	}
	if home == 0 {
		t.Errorf("no file under %s imports %s: the rule names the wrong package", pebbleHome, pebble)
	}
	for _, p := range pebbleExceptions {
		if !importing[p] {
			t.Errorf("%s no longer imports %s (or is gone): remove it from pebbleExceptions", p, pebble)
		}
	}
}

// A Go agent outside this module uses pkg/: nothing there may import
// internal/.
func TestPkgImportsNothingInternal(t *testing.T) {
	for _, f := range sources(t) {
		if !under(f.path, "pkg") {
			continue
		}
		for _, im := range f.imports {
			if im == module+"/internal" || strings.HasPrefix(im, module+"/internal/") {
				t.Errorf("%s imports %s", f.path, im)
			}
		}
	}
}

// serviceOf is the service a path or import path is in: the directory
// under services/ ("projector" for services/projector/store/keys.go), ""
// outside services/.
func serviceOf(path string) string {
	path = strings.TrimPrefix(path, module+"/")
	rest, ok := strings.CutPrefix(path, "services/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// Each service is one room: its imports go down, to pkg/ and internal/,
// never to another service (what two services share lives below both).
// Test files may start other services (a test of the source service runs
// a writer).
func TestServicesImportNoOtherService(t *testing.T) {
	n := 0
	for _, f := range sources(t) {
		own := serviceOf(f.path)
		if own == "" {
			continue
		}
		n++
		for _, im := range f.imports {
			if !strings.HasPrefix(im, module+"/") {
				continue
			}
			if other := serviceOf(im); other != "" && other != own {
				t.Errorf("%s (service %s) imports %s of service %s: move what both need to pkg/ or internal/", f.path, own, im, other)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d files under services/", n)
	}
}

// serviceInternal reports whether im is a package below a service's root
// (services/projector/store): the service's own, not its assembly's.
func serviceInternal(im string) bool {
	rest, ok := strings.CutPrefix(im, module+"/services/")
	return ok && strings.Contains(rest, "/")
}

// cmdServiceInternalsExceptions are the files under cmd/ that may import
// a package below a service's root. Each needs a reason written here:
//   - the catch-up benchmark's floors open the projector's store and
//     write its event keys (store.Open, store.EventKey, store.Batch) to
//     measure the store alone against the whole projector.
var cmdServiceInternalsExceptions = []string{
	"cmd/sessionlog/internal/bench/catchup.go",
	"cmd/sessionlog/internal/bench/catchup_floor.go",
}

// The command assembles each service through its root package (its
// Config, New and wire types): what lies below the root is the service's
// own, and a command reaching into it ties the command to how the service
// is built.
func TestCmdImportsNoServiceInternals(t *testing.T) {
	importing := map[string]bool{}
	for _, f := range sources(t) {
		if !under(f.path, "cmd") {
			continue
		}
		for _, im := range f.imports {
			if !serviceInternal(im) {
				continue
			}
			importing[f.path] = true
			if !slices.Contains(cmdServiceInternalsExceptions, f.path) {
				t.Errorf("%s imports %s, below the root of service %s: use what the service's root package offers", f.path, im, serviceOf(im))
			}
		}
	}
	for _, p := range cmdServiceInternalsExceptions {
		if !importing[p] {
			t.Errorf("%s no longer imports a package below a service's root (or is gone): remove it from cmdServiceInternalsExceptions", p)
		}
	}
}

// The rules hold for a file that breaks them (the checks are not vacuous).
func TestRulesCatch(t *testing.T) {
	for path, want := range map[string]bool{
		"internal/logstore/store.go":              true,
		"cmd/sessionlog/internal/bench/append.go": true,
		"internal/bench/append.go":                false,
		"e2e/faults/x.go":                         true,
		"cmd/sessionlog/bench_cmd.go":             true,
		"cmd/sessionlog/tail.go":                  false,
		"services/writer/read.go":                 false,
		"pkg/client/load.go":                      false,
		"internal/logstorex/a.go":                 false,
	} {
		if got := jetstreamAllowedFor(path); got != want {
			t.Errorf("%s allowed %v, want %v", path, got, want)
		}
	}
	for path, want := range map[string]bool{
		"services/projector/store/store.go":        true,
		"services/projector/store/read_test.go":    true,
		"services/projector/http.go":               false,
		"services/projector/storex/a.go":           false,
		"cmd/sessionlog/internal/bench/catchup.go": false,
	} {
		if got := pebbleAllowedFor(path); got != want {
			t.Errorf("pebble allowed in %s: %v, want %v", path, got, want)
		}
	}
	for im, want := range map[string]bool{
		"github.com/cockroachdb/pebble":        true,
		"github.com/cockroachdb/pebble/v2":     true,
		"github.com/cockroachdb/pebble/v2/vfs": true,
		"github.com/cockroachdb/pebblex":       false,
		"github.com/cockroachdb/datadriven":    false,
	} {
		if got := importsPebble(im); got != want {
			t.Errorf("importsPebble(%s) = %v, want %v", im, got, want)
		}
	}
	for path, want := range map[string]string{
		"services/projector/store/store.go":  "projector",
		module + "/services/projector/store": "projector",
		module + "/services/writer":          "writer",
		"services/source/source.go":          "source",
		module + "/pkg/client":               "",
		"internal/assemble/assemble.go":      "",
		module + "/internal/services/x":      "",
		"cmd/sessionlog/services/x.go":       "",
	} {
		if got := serviceOf(path); got != want {
			t.Errorf("serviceOf(%s) = %q, want %q", path, got, want)
		}
	}
	for im, want := range map[string]bool{
		module + "/services/projector/store": true,
		module + "/services/projector":       false,
		module + "/services/writer":          false,
		module + "/pkg/client":               false,
		module + "/internal/services/x/y":    false,
	} {
		if got := serviceInternal(im); got != want {
			t.Errorf("serviceInternal(%s) = %v, want %v", im, got, want)
		}
	}
}

// pkg/client builds in a module that cannot see this one's internal/: Go
// refuses an internal import across modules, so this build fails the
// moment pkg/client (or what it imports) needs one.
func TestClientBuildsOutsideTheModule(t *testing.T) {
	top := root(t)
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// This module's requirements and go.sum: the same versions, so the
	// build needs no download.
	var mod bytes.Buffer
	mod.WriteString("module example.com/agent\n\ngo 1.26.8\n\nrequire " + module + " v0.0.0-00010101000000-000000000000\n")
	for _, r := range regexp.MustCompile(`(?s)\nrequire \(.*?\n\)`).FindAll(gomod, -1) {
		mod.Write(r)
		mod.WriteString("\n")
	}
	mod.WriteString("\nreplace " + module + " => " + top + "\n")
	sum, err := os.ReadFile(filepath.Join(top, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	const agent = `package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
)

func main() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		panic(err)
	}
	c := client.New(nc)
	st, err := client.Load(context.Background(), c, "s-1")
	fmt.Println(st, err, api.SubjectRead)
	rec, err := client.Recover(context.Background(), c, "s-1")
	fmt.Println(rec, err)
}
`
	for name, b := range map[string][]byte{"go.mod": mod.Bytes(), "go.sum": sum, "main.go": []byte(agent)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "agent"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of an agent outside the module: %v\n%s\ngo.mod:\n%s", err, out, mod.Bytes())
	}
}

// The shipped binary does not link package testing: test kits stay out of
// what operators run (go list -deps sees what the linker gets).
func TestBinaryLinksNoTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/sessionlog").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps gave %d packages", len(deps))
	}
	if slices.Contains(deps, "testing") {
		why, _ := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "-deps", module+"/cmd/sessionlog").Output()
		var via []string
		for _, l := range strings.Split(string(why), "\n") {
			if slices.Contains(strings.Fields(l), "testing") {
				via = append(via, strings.SplitN(l, ":", 2)[0])
			}
		}
		t.Errorf("cmd/sessionlog links package testing, imported by %v", via)
	}
}

// ./... is the module's own packages: Go code that npm packages ship in
// clients/*/node_modules is not vetted, tested or built as sessionlog's
// (clients/go.mod makes clients/ a module of its own).
func TestModuleHoldsNoForeignPackages(t *testing.T) {
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "/node_modules/") || strings.HasPrefix(p, module+"/clients/") {
			t.Errorf("go list ./... lists %s", p)
		}
	}
}
