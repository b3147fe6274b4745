//go:build race

package faults

// faultRace: the race detector slows every process several times over;
// the fleet paces itself down so that the services can keep up on CI's
// two cores.
const faultRace = true
