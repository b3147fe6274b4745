package session

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds every function of the package and the packages
// under it: a rule is read at once, and a switch that grows past it is
// split by family (rules_*.go), not lengthened.
const maxFuncLines = 120

// TestFunctionLength fails if a function (its declaration to its closing
// brace, comments inside included) in the non-test files of pkg/session
// reaches maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	var longest string
	var most int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			from, to := fset.Position(fn.Pos()), fset.Position(fn.End())
			n := to.Line - from.Line + 1
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				name = recvName(fn.Recv.List[0].Type) + "." + name
			}
			if n >= maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines, the bound is under %d: split it", path, from.Line, name, n, maxFuncLines)
			}
			if n > most {
				longest, most = name, n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if most == 0 {
		t.Fatal("no function found")
	}
	t.Logf("longest: %s, %d lines", longest, most)
}

func recvName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.StarExpr:
		return "*" + recvName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvName(x.X)
	}
	return "?"
}
