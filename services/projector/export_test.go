package projector

// DecodeForTest exposes decode to the external tests.
var DecodeForTest = decode
