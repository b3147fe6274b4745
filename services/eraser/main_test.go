package eraser

import (
	"testing"

	"github.com/sessionlog/sessionlog/internal/testbin"
)

// TestMain removes the nats-server binary RunProcess builds.
func TestMain(m *testing.M) { testbin.Main(m) }
