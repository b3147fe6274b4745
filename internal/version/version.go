// Package version says which sessionlog a binary is: the release it was
// cut from (Release, set here at each release) and the commit it was built
// from (read from the build information the Go toolchain embeds when it
// builds inside a git checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Release is the sessionlog release this source tree belongs to. A
// binary built from a commit after the release tag says so with its
// revision (see String).
const Release = "0.14.0"

// Info is what a binary knows of its own build.
type Info struct {
	Release  string // Release, or the module version when go install of a tag set one
	Revision string // the git commit, "" when not built in a checkout
	Time     string // the commit's time (RFC 3339), "" when unknown
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // the Go toolchain
}

// Get reads the running binary's build information.
func Get() Info {
	in := Info{Release: Release, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Release = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form `sessionlog version` prints:
// "sessionlog 0.14.0 (abc123def456 2026-12-06T05:00:00Z, modified) go1.26.8".
func (in Info) String() string {
	s := "sessionlog " + in.Release
	if in.Revision != "" {
		rev := in.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if in.Time != "" {
			s += " " + in.Time
		}
		if in.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return fmt.Sprintf("%s %s", s, in.Go)
}

// Short is the release with the revision when there is one, for protocol
// handshakes that take a version string ("0.14.0+abc123def456").
func (in Info) Short() string {
	if in.Revision == "" {
		return in.Release
	}
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return in.Release + "+" + rev
}
