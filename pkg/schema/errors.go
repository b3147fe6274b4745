package schema

import (
	"errors"
	"fmt"
)

// Code is an error code of the wire contract (DESIGN.md section 4 and 8).
// The set is closed: every refusal a service sends uses one of these.
type Code string

const (
	CodeBadRequest     Code = "bad_request"
	CodeInvalidEvent   Code = "invalid_event"
	CodeUnknownType    Code = "unknown_type"
	CodeStructure      Code = "structure"
	CodeConflict       Code = "conflict"
	CodePaused         Code = "paused"
	CodeClosed         Code = "closed"
	CodeForking        Code = "forking"
	CodeTooLarge       Code = "too_large"
	CodeNotCommitted   Code = "not_committed"
	CodeOutcomeUnknown Code = "outcome_unknown"
	CodeNotFound       Code = "not_found"
	CodeUnsafeCut      Code = "unsafe_cut"
	// CodeUnreadable is used by readers: the session holds an event this
	// reader cannot fold (unknown required type or newer schema).
	CodeUnreadable Code = "unreadable"
	// CodeErased: the session id belonged to an erased session (DESIGN.md
	// section 14); it cannot be created again.
	CodeErased   Code = "erased"
	CodeInternal Code = "internal"
	// CodeRolledBack: the log lost events acknowledged earlier (it came
	// back shorter, or different at an acknowledged seq). pkg/client
	// answers it from what was acknowledged to it; definite.
	CodeRolledBack Code = "rolled_back"
	// CodeForbidden: the requester's agent neither owns the session nor
	// was granted it (ADR 010); definite.
	CodeForbidden Code = "forbidden"
	// CodeQuotaExceeded: the requester's tenant is over a limit (ADR 010);
	// nothing was stored.
	CodeQuotaExceeded Code = "quota_exceeded"
)

// Codes lists every code, in the order of the contract's table.
var Codes = []Code{
	CodeBadRequest, CodeInvalidEvent, CodeUnknownType, CodeStructure, CodeConflict,
	CodePaused, CodeClosed, CodeForking, CodeTooLarge, CodeNotCommitted,
	CodeOutcomeUnknown, CodeNotFound, CodeUnsafeCut, CodeUnreadable, CodeErased, CodeInternal,
	CodeRolledBack, CodeForbidden, CodeQuotaExceeded,
}

// Error is a refusal with a contract code. Index is the position of the
// offending event in a request (-1 when the request as a whole is refused).
type Error struct {
	Code    Code
	Message string
	Index   int
	// CurrentSeq is set for conflicts: the session's actual last seq.
	CurrentSeq *uint64
	// NearestSafeBefore / NearestSafeAfter are set for unsafe_cut.
	NearestSafeBefore *uint64
	NearestSafeAfter  *uint64
}

func (e *Error) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("%s: event %d: %s", e.Code, e.Index, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, &Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Errorf builds a request-level Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Index: -1}
}

// CodeOf returns the contract code of err, or CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// WithIndex returns a copy of e that names event i of a request.
func (e *Error) WithIndex(i int) *Error {
	c := *e
	c.Index = i
	return &c
}

// Sentinel errors of the codec.
var (
	// ErrNewerSchema: the event's schemaVersion is newer than this reader knows.
	ErrNewerSchema = errors.New("schema: newer schema version")
)
