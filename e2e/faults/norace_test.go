//go:build !race

package faults

const faultRace = false
