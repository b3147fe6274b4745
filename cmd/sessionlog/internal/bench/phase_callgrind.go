//go:build callgrind && cgo && linux

package bench

/*
#include <stdlib.h>
#include <valgrind/callgrind.h>
static void zero(void) { CALLGRIND_ZERO_STATS; }
static void dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
*/
import "C"

import (
	"strings"
	"unsafe"
)

// markPhase, in a binary built with -tags callgrind and run under
// valgrind --tool=callgrind, zeroes the counters at a name ending in
// "-start" and dumps them (the whole process's instructions since) at any
// other: each measured phase gets its own dump, named after it, whatever
// the setup around it ran. Outside valgrind it does nothing.
func markPhase(name string) {
	if strings.HasSuffix(name, "-start") {
		C.zero()
		return
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	C.dump(cs)
}
