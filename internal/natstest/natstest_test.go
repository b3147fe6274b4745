package natstest

import "testing"

// The helpers take what testing.TB and *testing.T give.
var (
	_ TB                   = (testing.TB)(nil)
	_ Subtests[*testing.T] = (*testing.T)(nil)
)
