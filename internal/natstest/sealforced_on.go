//go:build sealforced

package natstest

// SealForced: see sealforced_off.go.
const SealForced = true
