//go:build !(callgrind && cgo && linux)

package bench

// markPhase marks the start ("<name>-start") or end of a phase whose
// instructions a callgrind build counts (phase_callgrind.go).
func markPhase(string) {}
