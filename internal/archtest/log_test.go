package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// declaredLog are the packages of the services that declare what they
// need of the log, each as its interface Log: the root packages (an
// interface *logstore.Store satisfies, and internal/memlog too, for their
// rule scripts), and the projector's HTTP side.
var declaredLog = []string{"services/eraser", "services/forker", "services/projector", "services/projector/httpapi", "services/repairer"}

// storeHolders reads one Go file of a package that declares its Log: what
// in it holds or takes a *logstore.Store besides its Config's Store field
// (the assembly hands the store over there): a field of another struct, a
// function's or a method's parameter (the commands' entry points, as
// projector.Rebuild, included). declares reports whether the file
// declares the interface Log.
func storeHolders(fset *token.FileSet, name string, src any) (bad []string, declares bool, err error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, false, err
	}
	isStore := func(e ast.Expr) bool {
		st, ok := e.(*ast.StarExpr)
		if !ok {
			return false
		}
		sel, ok := st.X.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && pkg.Name == "logstore" && sel.Sel.Name == "Store"
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			if _, ok := n.Type.(*ast.InterfaceType); ok && n.Name.Name == "Log" {
				declares = true
			}
			st, ok := n.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				if !isStore(fld.Type) {
					continue
				}
				if n.Name.Name == "Config" && len(fld.Names) == 1 && fld.Names[0].Name == "Store" {
					continue
				}
				bad = append(bad, fmt.Sprintf("%s: a field of %s", fset.Position(fld.Pos()), n.Name.Name))
			}
		case *ast.FuncDecl:
			for _, p := range n.Type.Params.List {
				if isStore(p.Type) {
					bad = append(bad, fmt.Sprintf("%s: a parameter of %s", fset.Position(p.Pos()), n.Name.Name))
				}
			}
		case *ast.FuncLit:
			for _, p := range n.Type.Params.List {
				if isStore(p.Type) {
					bad = append(bad, fmt.Sprintf("%s: a parameter of a function literal", fset.Position(p.Pos())))
				}
			}
		}
		return true
	})
	return bad, declares, nil
}

// A service that declares what it needs of the log holds the log as that
// interface: its Service, its parts, its functions and the entry points
// of the commands (projector.Rebuild, Verify) never hold or take a
// *logstore.Store, so that they run on internal/memlog in the rule
// scripts and tests as they run on JetStream (the store is named only
// where the assembly hands it over: Config.Store). Each such package
// declares its Log.
func TestServicesHoldTheLogTheyDeclare(t *testing.T) {
	top := root(t)
	fset := token.NewFileSet()
	n := 0
	for _, dir := range declaredLog {
		files, declared := checkPackage(t, fset, filepath.Join(top, dir), storeHolders, func(_, b string) {
			t.Errorf("%s holds a *logstore.Store: hold the log as the interface the service declares (its Log)", b)
		})
		n += files
		if !declared {
			t.Errorf("%s declares no interface Log: declare what it needs of the log", dir)
		}
	}
	if n < 10 {
		t.Fatalf("found only %d files in %v", n, declaredLog)
	}
}

// The rule holds for a file that breaks it.
func TestServicesHoldTheLogRuleCatches(t *testing.T) {
	const src = `package x

import "github.com/sessionlog/sessionlog/internal/logstore"

type Config struct{ Store *logstore.Store }

type Service struct {
	ls  *logstore.Store
	log Log
}

func New(cfg Config) {}

func Rebuild(ls *logstore.Store) {}

func (s *Service) Verify(ls *logstore.Store) {}

func newRollbacks(ls *logstore.Store) {}

var f = func(ls *logstore.Store) {}
`
	bad, declares, err := storeHolders(token.NewFileSet(), "x.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if declares {
		t.Error("x.go declares no interface Log, found one")
	}
	want := []string{
		"x.go:8:2: a field of Service",
		"x.go:14:14: a parameter of Rebuild",
		"x.go:16:26: a parameter of Verify",
		"x.go:18:19: a parameter of newRollbacks",
		"x.go:20:14: a parameter of a function literal",
	}
	if got := strings.Join(bad, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	for src, want := range map[string]bool{
		"package x\n\ntype Log interface{ Connected() bool }\n":  true,
		"package x\n\ntype Log struct{}\n":                       false,
		"package x\n\ntype logs interface{ Connected() bool }\n": false,
	} {
		if _, declares, err := storeHolders(token.NewFileSet(), "x.go", src); err != nil || declares != want {
			t.Errorf("%q declares Log %v (%v), want %v", src, declares, err, want)
		}
	}
}
