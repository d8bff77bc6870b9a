package engine

import "fmt"

// TruncateError is the error of a receive whose message was longer than
// its buffer: ErrTruncate (errors.Is matches it) with both sizes, so that
// a caller can tell how long the whole message was, which the status
// (the bytes stored) cannot say.
type TruncateError struct {
	Length int // bytes in the whole message
	Buffer int // bytes the receive could store
}

func (e *TruncateError) Error() string {
	return fmt.Sprintf("%v: %d-byte message, %d-byte buffer", ErrTruncate, e.Length, e.Buffer)
}

// Unwrap returns ErrTruncate.
func (e *TruncateError) Unwrap() error { return ErrTruncate }
