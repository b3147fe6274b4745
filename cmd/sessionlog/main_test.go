package main

import (
	"testing"

	"github.com/sessionlog/sessionlog/internal/testbin"
)

// TestMain removes the binary testbin built for the tests that run it as
// a process (the ACP conformance test).
func TestMain(m *testing.M) { testbin.Main(m) }
