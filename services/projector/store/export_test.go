package store

// MarshalSummary is marshalSummary, for the summary tests and benchmark
// (package store_test: their summaries are the projector's).
var MarshalSummary = marshalSummary
