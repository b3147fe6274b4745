package client

import (
	"errors"
	"fmt"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Error is a refusal with a contract code (DESIGN.md section 4).
type Error struct {
	Code    schema.Code
	Message string
	// CurrentSeq is the session's last seq, for conflicts.
	CurrentSeq uint64
	// Index is the offending event of the request, -1 for the request.
	Index int
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

func sentinel(c schema.Code) *Error { return &Error{Code: c, Index: -1} }

// One sentinel per contract code.
var (
	ErrBadRequest     = sentinel(schema.CodeBadRequest)
	ErrInvalidEvent   = sentinel(schema.CodeInvalidEvent)
	ErrUnknownType    = sentinel(schema.CodeUnknownType)
	ErrStructure      = sentinel(schema.CodeStructure)
	ErrConflict       = sentinel(schema.CodeConflict)
	ErrPaused         = sentinel(schema.CodePaused)
	ErrClosed         = sentinel(schema.CodeClosed)
	ErrForking        = sentinel(schema.CodeForking)
	ErrTooLarge       = sentinel(schema.CodeTooLarge)
	ErrNotCommitted   = sentinel(schema.CodeNotCommitted)
	ErrOutcomeUnknown = sentinel(schema.CodeOutcomeUnknown)
	ErrNotFound       = sentinel(schema.CodeNotFound)
	ErrUnsafeCut      = sentinel(schema.CodeUnsafeCut)
	ErrUnreadable     = sentinel(schema.CodeUnreadable)
	ErrInternal       = sentinel(schema.CodeInternal)
)

func errorf(c schema.Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...), Index: -1}
}

// CodeOf returns the contract code of err ("" when it has none).
func CodeOf(err error) schema.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
