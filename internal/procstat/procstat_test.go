package procstat

import (
	"os"
	"runtime"
	"testing"
)

// CPU grows with work; SysIO counts this process's own writes.
func TestCountersGrow(t *testing.T) {
	c0 := CPU()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i ^ (x >> 3)
	}
	if c := CPU(); c <= c0 {
		t.Fatalf("CPU did not grow: %v then %v (x=%d)", c0, c, x)
	}
	if runtime.GOOS != "linux" {
		return
	}
	f, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, w0 := SysIO()
	for i := 0; i < 10; i++ {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, w := SysIO(); w-w0 < 10 {
		t.Fatalf("%d writes counted for 10", w-w0)
	}
}
