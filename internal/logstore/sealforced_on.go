//go:build sealforced

package logstore

// SealForced: see sealforced_off.go. This build seals in every store.
const SealForced = true
