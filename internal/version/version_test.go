package version

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	in := Info{Release: "1.2.3", Revision: "0123456789abcdef", Time: "2026-12-06T05:00:00Z", Modified: true, Go: "go1.26.8"}
	if got, want := in.String(), "sessionlog 1.2.3 (0123456789ab 2026-12-06T05:00:00Z, modified) go1.26.8"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got, want := in.Short(), "1.2.3+0123456789ab"; got != want {
		t.Fatalf("Short() = %q, want %q", got, want)
	}
	bare := Info{Release: "1.2.3", Go: "go1.26.8"}
	if got, want := bare.String(), "sessionlog 1.2.3 go1.26.8"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got := Get(); got.Release == "" || !strings.HasPrefix(got.Go, "go") {
		t.Fatalf("Get() = %+v: want a release and a Go version", got)
	}
}
