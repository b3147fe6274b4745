package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// serviceDefaultNames are the exported Default* names a service's root
// package may declare besides DefaultConfig, none of them a setting of
// its Config: the projector's are the defaults of an HTTP request's limit
// parameter, the writer's the reply size of a read from a store when no
// connection says what the server takes (writer.ReadPage,
// writer.StoreReader). A name that joins the list needs a reason written
// here.
var serviceDefaultNames = map[string]bool{
	"DefaultListLimit": true, "DefaultEventsLimit": true, "DefaultSearchLimit": true,
	"DefaultMaxReadBytes": true,
}

// serviceDefaults reads one Go file of a service's root package: the
// exported constants and variables named Default* that
// serviceDefaultNames does not allow, and whether it declares
// func DefaultConfig() Config.
func serviceDefaults(fset *token.FileSet, name string, src any) (bad []string, declares bool, err error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, false, err
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "DefaultConfig" && d.Type.Params.NumFields() == 0 && d.Type.Results.NumFields() == 1 {
				if id, ok := d.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "Config" {
					declares = true
				}
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for _, n := range vs.Names {
					if strings.HasPrefix(n.Name, "Default") && n.IsExported() && !serviceDefaultNames[n.Name] {
						bad = append(bad, n.Name)
					}
				}
			}
		}
	}
	return bad, declares, nil
}

// Each service states its defaults once, in DefaultConfig, which its New
// fills a zero Config from and the commands' flags default to (through
// internal/assemble): no service keeps a Default* constant of its own
// beside it, where a default could be stated a second time.
func TestServiceDefaultsInDefaultConfig(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(root(t), "services", "*"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, dir := range dirs {
		files, declares := checkPackage(t, fset, dir, serviceDefaults, func(file, name string) {
			t.Errorf("services/%s/%s declares %s: state the default in the service's DefaultConfig", filepath.Base(dir), filepath.Base(file), name)
		})
		if files > 0 {
			n++
			if !declares {
				t.Errorf("services/%s declares no func DefaultConfig() Config", filepath.Base(dir))
			}
		}
	}
	if n < 6 {
		t.Fatalf("found only %d services", n)
	}
}

// The rule catches a planted Default* constant (what every service had
// before its DefaultConfig) and a service without DefaultConfig, and lets
// the allowed names pass.
func TestServiceDefaultsRuleCatches(t *testing.T) {
	for _, tc := range []struct {
		src      string
		bad      string
		declares bool
	}{
		{"package writer\nconst DefaultMaxConcurrent = 1024\nconst stripes = 1\n", "DefaultMaxConcurrent", false},
		{"package writer\nvar DefaultGrace, other = 1, 2\nfunc DefaultConfig() Config { return Config{} }\n", "DefaultGrace", true},
		{"package projector\nconst DefaultListLimit = 50\nfunc (Config) DefaultConfig() Config { return Config{} }\n", "", false},
	} {
		bad, declares, err := serviceDefaults(token.NewFileSet(), "planted.go", tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(bad, ","); got != tc.bad || declares != tc.declares {
			t.Errorf("bad %q, DefaultConfig %v; want %q, %v in:\n%s", got, declares, tc.bad, tc.declares, tc.src)
		}
	}
}
