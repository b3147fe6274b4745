//go:build race

package projector_test

const raceEnabled = true
