//go:build !cgo || !linux

package bench

// trimCHeap: without cgo Pebble's memory is Go's (debug.FreeOSMemory hands
// it back).
func trimCHeap() {}
