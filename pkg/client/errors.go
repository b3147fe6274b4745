package client

import (
	"errors"
	"fmt"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// Error is a refusal with a contract code (DESIGN.md section 4).
type Error struct {
	Code    api.Code
	Message string
	// CurrentSeq is the session's last seq, for conflicts.
	CurrentSeq uint64
	// Index is the offending event of the request, -1 for the request.
	Index int
	// NearestSafeBefore and NearestSafeAfter are the safe points nearest
	// a fork's refused cut (unsafe_cut), when the parent has them.
	NearestSafeBefore, NearestSafeAfter *uint64
	// hasCurrent: the answer carried currentSeq (a lease conflict has none).
	hasCurrent bool
}

func (e *Error) Error() string {
	switch {
	case e.Message == "":
		return "sessionlog: " + string(e.Code)
	case e.Index >= 0:
		return fmt.Sprintf("sessionlog: %s: event %d: %s", e.Code, e.Index, e.Message)
	}
	return fmt.Sprintf("sessionlog: %s: %s", e.Code, e.Message)
}

// Is matches a sentinel of the same code: errors.Is(err, ErrConflict).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

func sentinel(c api.Code) *Error { return &Error{Code: c, Index: -1} }

// One sentinel per contract code.
var (
	ErrBadRequest     = sentinel(api.CodeBadRequest)
	ErrInvalidEvent   = sentinel(api.CodeInvalidEvent)
	ErrUnknownType    = sentinel(api.CodeUnknownType)
	ErrStructure      = sentinel(api.CodeStructure)
	ErrConflict       = sentinel(api.CodeConflict)
	ErrPaused         = sentinel(api.CodePaused)
	ErrClosed         = sentinel(api.CodeClosed)
	ErrForking        = sentinel(api.CodeForking)
	ErrTooLarge       = sentinel(api.CodeTooLarge)
	ErrNotCommitted   = sentinel(api.CodeNotCommitted)
	ErrOutcomeUnknown = sentinel(api.CodeOutcomeUnknown)
	ErrNotFound       = sentinel(api.CodeNotFound)
	ErrUnsafeCut      = sentinel(api.CodeUnsafeCut)
	ErrUnreadable     = sentinel(api.CodeUnreadable)
	ErrErased         = sentinel(api.CodeErased)
	ErrInternal       = sentinel(api.CodeInternal)
	// ErrRolledBack: the log lost events acknowledged to this client
	// (rolledback.go); definite, no retry brings them back.
	ErrRolledBack = sentinel(api.CodeRolledBack)
	// ErrForbidden: the session is another agent's and not granted to
	// this one (ADR 010); definite.
	ErrForbidden = sentinel(api.CodeForbidden)
	// ErrQuotaExceeded: the tenant is over a limit (ADR 010); nothing was
	// stored, and the same request may succeed later.
	ErrQuotaExceeded = sentinel(api.CodeQuotaExceeded)
)

func errorf(c api.Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...), Index: -1}
}

// CodeOf returns the contract code of err ("" when it has none).
func CodeOf(err error) api.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
