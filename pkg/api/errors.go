package api

import "github.com/sessionlog/sessionlog/pkg/schema"

// Code is a contract error code (section 4). It is the type of
// schema.Error's code, so the domain's refusals and the wire share one
// enumeration: pkg/schema cannot import this package (the requests here
// carry its envelopes).
type Code = schema.Code

// The codes, in the order of the contract's table (section 4), then the
// codes of the other services (sections 8, 12, 14).
const (
	CodeBadRequest     = schema.CodeBadRequest
	CodeInvalidEvent   = schema.CodeInvalidEvent
	CodeUnknownType    = schema.CodeUnknownType
	CodeStructure      = schema.CodeStructure
	CodeConflict       = schema.CodeConflict
	CodePaused         = schema.CodePaused
	CodeClosed         = schema.CodeClosed
	CodeForking        = schema.CodeForking
	CodeTooLarge       = schema.CodeTooLarge
	CodeUnreadable     = schema.CodeUnreadable
	CodeErased         = schema.CodeErased
	CodeNotCommitted   = schema.CodeNotCommitted
	CodeOutcomeUnknown = schema.CodeOutcomeUnknown
	CodeNotFound       = schema.CodeNotFound
	CodeUnsafeCut      = schema.CodeUnsafeCut
	// CodeInternal: a failure the contract has no code for (a bug or an
	// outage); never a refusal of the request's content.
	CodeInternal = schema.CodeInternal
	// CodeRolledBack: the log lost events acknowledged earlier (pkg/client).
	CodeRolledBack = schema.CodeRolledBack
	// CodeForbidden: the session is another agent's (ADR 010).
	CodeForbidden = schema.CodeForbidden
	// CodeQuotaExceeded: the tenant is over a limit; nothing stored.
	CodeQuotaExceeded = schema.CodeQuotaExceeded
)

// Codes lists every code.
var Codes = schema.Codes

// ErrorBody is every service's error reply: {"error":{...}}. The code is
// also sent in the micro error headers (Nats-Service-Error-Code).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a contract code and the fields some codes add:
// currentSeq (conflict), index (the refused event of a request) and the
// nearest safe seqs (unsafe_cut).
type ErrorDetail struct {
	Code              Code    `json:"code"`
	Message           string  `json:"message"`
	CurrentSeq        *uint64 `json:"currentSeq,omitempty"`
	Index             *int    `json:"index,omitempty"`
	NearestSafeBefore *uint64 `json:"nearestSafeBefore,omitempty"`
	NearestSafeAfter  *uint64 `json:"nearestSafeAfter,omitempty"`
}
