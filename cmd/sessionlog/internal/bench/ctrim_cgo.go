//go:build cgo && linux

package bench

/*
#include <malloc.h>
*/
import "C"

// trimCHeap hands the C heap's free pages back to the system. Pebble
// allocates its memtables and block cache with C's malloc where cgo is
// on, and glibc keeps what a closed store freed (its trim threshold grows
// with the large blocks it has served): without this, a floor trial's
// freed memtables stay in the RSS the catch-up after it is measured from.
func trimCHeap() { C.malloc_trim(0) }
