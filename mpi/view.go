package mpi

import "unsafe"

// Typed buffers as bytes. Messages carry bytes; these helpers let a program
// send and receive slices of numbers without copying them into and out of
// byte slices, in the spirit of MPI's predefined datatypes (MPI_INT,
// MPI_DOUBLE, ...). The bytes are the numbers' in-memory representation,
// in the host's byte order, so they are meaningful between processes of
// the same architecture, as all of a Tachyon job's are.

// Numeric is the element types whose slices AsBytes and FromBytes view as
// bytes: fixed-size numbers without pointers, for which every byte
// pattern read back is a valid value.
type Numeric interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64 | ~int | ~uint | ~uintptr | ~complex64 | ~complex128
}

// AsBytes returns the memory of s as bytes, without copying: the result
// shares s's memory, so a send of it sends the numbers and a receive into
// it stores into s. Its length is len(s) times the element size. It
// returns nil for an empty s.
func AsBytes[T Numeric](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// FromBytes returns the memory of b as a slice of T, without copying: the
// reverse of AsBytes, as for a received message. It returns ErrBuffer if
// len(b) is not a multiple of T's size, or if b does not start at an
// address aligned for T (as a slice of a larger buffer at an odd offset
// may not). It returns nil for an empty b.
func FromBytes[T Numeric](b []byte) ([]T, error) {
	const op = "FromBytes"
	var zero T
	size, align := int(unsafe.Sizeof(zero)), uintptr(unsafe.Alignof(zero))
	if len(b)%size != 0 {
		return nil, noComm(errorf(ErrBuffer, op, "%d bytes are not a whole number of %d-byte %T", len(b), size, zero))
	}
	if len(b) == 0 {
		return nil, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%align != 0 {
		return nil, noComm(errorf(ErrBuffer, op, "buffer at %p is not aligned to %d bytes for %T", p, align, zero))
	}
	return unsafe.Slice((*T)(p), len(b)/size), nil
}
