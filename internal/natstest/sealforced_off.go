//go:build !sealforced

package natstest

// SealForced is true in a build with the tag sealforced, where every
// store seals the bodies it writes (logstore.SealForced, `make
// test-sealed`).
const SealForced = false
