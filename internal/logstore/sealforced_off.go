//go:build !sealforced

package logstore

// SealForced is true in a build with the tag sealforced (`make
// test-sealed`): there every store seals the bodies it writes, whatever
// its Config.SealBodies, so a package's tests run with sealed bodies
// (docs/adr/011-sealed-bodies.md, "Default"). A build without the tag, as
// every shipped binary is, has it false and Open does not look at it.
const SealForced = false
