package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// The commands, benchmarks and up's services are tables a reader sees at
// once (main.go, bench.go, up.go), not init() registrations spread over
// the package.
func TestNoInitRegistration(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s: func init; add the command to the table in main.go instead", fset.Position(fd.Pos()))
			}
		}
	}
}

func TestUpStartsWriterFirst(t *testing.T) {
	want := []string{"writer", "source", "repairer", "eraser", "forker", "projector"}
	if len(upServices) != len(want) {
		t.Fatalf("up runs %d services, want %v", len(upServices), want)
	}
	for i, s := range upServices {
		if s.Name != want[i] || s.Start == nil {
			t.Errorf("up service %d: %q, want %q with a Start", i, s.Name, want[i])
		}
	}
}
