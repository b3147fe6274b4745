package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// cmdServiceNames are the names of a service's root package that the
// command's own files (cmd/sessionlog/*.go, not its tests nor its
// internal/) may use: a service's name for its logs and its NATS
// micro-service, and the projector's Service for the HTTP handler its
// command serves. Everything else of a service (its config, its
// constructor, its wire types, its tools) the command reaches through
// internal/assemble or a package of its own (internal/sre,
// internal/transfer, internal/ship, ...): the command parses flags and
// assembles, and keeps no service's logic. A name that joins the list
// needs a reason written here.
var cmdServiceNames = map[string][]string{
	"eraser":    {"ServiceName"},
	"forker":    {"ServiceName"},
	"repairer":  {"ServiceName"},
	"source":    {"ServiceName"},
	"projector": {"Service"},
}

// cmdServiceUses lists, for one Go file, each name it uses of a service's
// root package that cmdServiceNames does not allow ("repairer.RepairRequest").
func cmdServiceUses(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]string{} // local name -> service
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		svc := serviceOf(p)
		if svc == "" || !strings.HasPrefix(p, module+"/") {
			continue
		}
		local := filepath.Base(p)
		if im.Name != nil {
			local = im.Name.Name
		}
		pkgs[local] = svc
	}
	var bad []string
	seen := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		svc, ok := pkgs[id.Name]
		if !ok {
			return true
		}
		use := svc + "." + sel.Sel.Name
		allowed := false
		for _, n := range cmdServiceNames[svc] {
			allowed = allowed || n == sel.Sel.Name
		}
		if !allowed && !seen[use] {
			seen[use] = true
			bad = append(bad, use)
		}
		return true
	})
	sort.Strings(bad)
	return bad, nil
}

// The command's own files use of a service only the names in
// cmdServiceNames: its logic lives in packages of its own.
func TestCmdUsesOnlyServiceNames(t *testing.T) {
	dir := filepath.Join(root(t), "cmd", "sessionlog")
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, p := range names {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		n++
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := cmdServiceUses(fset, p, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, use := range bad {
			t.Errorf("cmd/sessionlog/%s uses %s: the command parses flags and assembles; move the logic to a package of its own (internal/sre, internal/transfer, ...) or reach the service through internal/assemble", filepath.Base(p), use)
		}
	}
	if n < 20 {
		t.Fatalf("found only %d files in %s", n, dir)
	}
}

// The rule catches a planted use of a service's wire type (what the
// repair verb used before its logic moved to internal/sre), under the
// package's own name and another, and lets the allowed names pass.
func TestCmdServiceRuleCatches(t *testing.T) {
	for src, want := range map[string]string{
		`package main
import "github.com/sessionlog/sessionlog/services/repairer"
var _ = repairer.RepairRequest{SessionID: "s"}
var _ = repairer.ServiceName`: "repairer.RepairRequest",
		`package main
import rp "github.com/sessionlog/sessionlog/services/projector"
var _ = rp.Verify`: "projector.Verify",
		`package main
import "github.com/sessionlog/sessionlog/services/projector"
var _ *projector.Service`: "",
		`package main
import "github.com/sessionlog/sessionlog/pkg/client"
var _ = client.New`: "",
	} {
		bad, err := cmdServiceUses(token.NewFileSet(), "planted.go", src)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(bad, ","); got != want {
			t.Errorf("uses %q, want %q in:\n%s", got, want, src)
		}
	}
}
