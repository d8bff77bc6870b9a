package mpi

import (
	"reflect"
	"unsafe"
)

// Reduction operations (MPI_Op of MPI-4.1 section 6.9): what Reduce,
// Allreduce, ReduceScatter, Scan and Exscan combine the ranks'
// contributions with, element by element.

// ReduceOp is an operation that combines two vectors of numbers element by
// element, as Reduce and the other reductions apply it (MPI_Op). It is a
// small value: the predefined operations are variables of the package,
// and NewReduceOp makes a user's. The zero ReduceOp is no operation: the
// reductions return ErrOp for it, as for an operation that does not apply
// to the element type given (Max on complex numbers, Band on floats, a
// user operation made for another type).
type ReduceOp struct {
	kind opKind
	user *userOp // opUser's
}

// opKind names a predefined operation.
type opKind uint8

const (
	opNone opKind = iota
	opSum
	opProd
	opMax
	opMin
	opLand
	opLor
	opLxor
	opBand
	opBor
	opBxor
	opMaxLoc
	opMinLoc
	opUser
)

var opKindNames = [...]string{"no operation", "Sum", "Prod", "Max", "Min", "Land", "Lor", "Lxor",
	"Band", "Bor", "Bxor", "MaxLoc", "MinLoc", "a user operation"}

// The predefined operations (MPI_SUM, MPI_PROD, ...). Each applies to the
// element types MPI-4.1 section 6.9.2 allows:
//
//   - Sum, Prod: every Numeric type.
//   - Max, Min: integers and floats (not complex numbers).
//   - Land, Lor, Lxor: integers, as C's logical operators (0 is false,
//     anything else true; the result is 0 or 1).
//   - Band, Bor, Bxor: integers (bytes are uint8).
//   - MaxLoc, MinLoc: pairs (value, index) of integers or floats stored
//     side by side in the slice, as MPI's MPI_2INT and
//     MPI_2DOUBLE_PRECISION: element 2k is a value, 2k+1 its index. The
//     result keeps the largest (smallest) value and, of the ranks that hold
//     it, the smallest index. The slice's length must be even (ErrCount).
//
// All are commutative and associative (floating-point sums and products
// up to rounding; the order the ranks' values are combined in is fixed by
// the algorithm and the number of ranks, so repeated calls give the same
// bits).
var (
	Sum    = ReduceOp{kind: opSum}
	Prod   = ReduceOp{kind: opProd}
	Max    = ReduceOp{kind: opMax}
	Min    = ReduceOp{kind: opMin}
	Land   = ReduceOp{kind: opLand}
	Lor    = ReduceOp{kind: opLor}
	Lxor   = ReduceOp{kind: opLxor}
	Band   = ReduceOp{kind: opBand}
	Bor    = ReduceOp{kind: opBor}
	Bxor   = ReduceOp{kind: opBxor}
	MaxLoc = ReduceOp{kind: opMaxLoc}
	MinLoc = ReduceOp{kind: opMinLoc}
)

// userOp is a user's operation: fn over T's bytes.
type userOp struct {
	dt      dtype
	commute bool
	apply   kernel
}

// NewReduceOp returns a user's reduction operation on slices of T
// (MPI_OP_CREATE). fn(in, inout) sets inout[i] = in[i] op inout[i] for
// every i; in and inout have the same length, and fn must not keep them.
// A commutative operation may be applied in any order; a non-commutative
// one is applied in rank order: the result of a reduction over ranks 0..n-1
// is v0 op v1 op ... op v(n-1), grouped as the algorithm chooses (op must
// be associative). fn runs on the goroutine that calls the collective, or
// for a nonblocking one on whichever goroutine drives its progress. A nil
// fn gives the zero ReduceOp, which the reductions refuse with ErrOp.
func NewReduceOp[T Numeric](fn func(in, inout []T), commutative bool) ReduceOp {
	if fn == nil {
		return ReduceOp{}
	}
	return ReduceOp{kind: opUser, user: &userOp{dt: dtypeOf[T](), commute: commutative,
		apply: func(in, inout []byte) { fn(bytesAs[T](in), bytesAs[T](inout)) }}}
}

// Commutative reports whether op may be applied in any order: true for
// the predefined operations.
func (op ReduceOp) Commutative() bool {
	if op.kind == opUser {
		return op.user.commute
	}
	return op.kind != opNone
}

// String names op ("Sum", "a user operation").
func (op ReduceOp) String() string { return opKindNames[op.kind] }

// dtype is the element type of a collective's buffers, by its underlying
// type.
type dtype uint8

const (
	dtNone dtype = iota
	dtInt8
	dtInt16
	dtInt32
	dtInt64
	dtUint8
	dtUint16
	dtUint32
	dtUint64
	dtFloat32
	dtFloat64
	dtInt
	dtUint
	dtUintptr
	dtComplex64
	dtComplex128
	dtCount
)

var dtypeNames = [...]string{"no type", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
	"float32", "float64", "int", "uint", "uintptr", "complex64", "complex128"}

func (d dtype) String() string { return dtypeNames[d] }

// dtypeOf returns the dtype of T's underlying type.
func dtypeOf[T Numeric]() dtype {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int8:
		return dtInt8
	case reflect.Int16:
		return dtInt16
	case reflect.Int32:
		return dtInt32
	case reflect.Int64:
		return dtInt64
	case reflect.Uint8:
		return dtUint8
	case reflect.Uint16:
		return dtUint16
	case reflect.Uint32:
		return dtUint32
	case reflect.Uint64:
		return dtUint64
	case reflect.Float32:
		return dtFloat32
	case reflect.Float64:
		return dtFloat64
	case reflect.Int:
		return dtInt
	case reflect.Uint:
		return dtUint
	case reflect.Uintptr:
		return dtUintptr
	case reflect.Complex64:
		return dtComplex64
	case reflect.Complex128:
		return dtComplex128
	}
	return dtNone
}

// bytesAs views b as a slice of T; b's length is a multiple of T's size
// and b is aligned for T (the collectives' buffers are the caller's slices
// of T and scratch space allocated as words).
func bytesAs[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// kernel applies an operation to byte views of two vectors of one type:
// inout = in op inout, element by element.
type kernel func(in, inout []byte)

// kernelFor returns the kernel of op on elements of type dt, or an
// ErrOp error (for routine name) if op does not apply to dt.
func kernelFor(name string, op ReduceOp, dt dtype) (kernel, error) {
	switch {
	case op.kind == opUser:
		if op.user.dt != dt {
			return nil, errorf(ErrOp, name, "a user operation made for %v applied to %v", op.user.dt, dt)
		}
		return op.user.apply, nil
	case op.kind == opNone:
		return nil, errorf(ErrOp, name, "no operation (the zero ReduceOp)")
	}
	if k := kernels[op.kind][dt]; k != nil {
		return k, nil
	}
	return nil, errorf(ErrOp, name, "%v does not apply to %v", op, dt)
}

// kernels holds the predefined operations' kernels by operation and type;
// nil where an operation does not apply.
var kernels [opUser][dtCount]kernel

func init() {
	// Integers of every size and sign.
	setInts := func(k opKind, f8, f16, f32, f64, fu8, fu16, fu32, fu64, fi, fu, fp kernel) {
		kernels[k][dtInt8], kernels[k][dtInt16], kernels[k][dtInt32], kernels[k][dtInt64] = f8, f16, f32, f64
		kernels[k][dtUint8], kernels[k][dtUint16], kernels[k][dtUint32], kernels[k][dtUint64] = fu8, fu16, fu32, fu64
		kernels[k][dtInt], kernels[k][dtUint], kernels[k][dtUintptr] = fi, fu, fp
	}
	setInts(opSum, bk(sumInto[int8]), bk(sumInto[int16]), bk(sumInto[int32]), bk(sumInto[int64]),
		bk(sumInto[uint8]), bk(sumInto[uint16]), bk(sumInto[uint32]), bk(sumInto[uint64]),
		bk(sumInto[int]), bk(sumInto[uint]), bk(sumInto[uintptr]))
	setInts(opProd, bk(prodInto[int8]), bk(prodInto[int16]), bk(prodInto[int32]), bk(prodInto[int64]),
		bk(prodInto[uint8]), bk(prodInto[uint16]), bk(prodInto[uint32]), bk(prodInto[uint64]),
		bk(prodInto[int]), bk(prodInto[uint]), bk(prodInto[uintptr]))
	setInts(opMax, bk(maxInto[int8]), bk(maxInto[int16]), bk(maxInto[int32]), bk(maxInto[int64]),
		bk(maxInto[uint8]), bk(maxInto[uint16]), bk(maxInto[uint32]), bk(maxInto[uint64]),
		bk(maxInto[int]), bk(maxInto[uint]), bk(maxInto[uintptr]))
	setInts(opMin, bk(minInto[int8]), bk(minInto[int16]), bk(minInto[int32]), bk(minInto[int64]),
		bk(minInto[uint8]), bk(minInto[uint16]), bk(minInto[uint32]), bk(minInto[uint64]),
		bk(minInto[int]), bk(minInto[uint]), bk(minInto[uintptr]))
	setInts(opLand, bk(landInto[int8]), bk(landInto[int16]), bk(landInto[int32]), bk(landInto[int64]),
		bk(landInto[uint8]), bk(landInto[uint16]), bk(landInto[uint32]), bk(landInto[uint64]),
		bk(landInto[int]), bk(landInto[uint]), bk(landInto[uintptr]))
	setInts(opLor, bk(lorInto[int8]), bk(lorInto[int16]), bk(lorInto[int32]), bk(lorInto[int64]),
		bk(lorInto[uint8]), bk(lorInto[uint16]), bk(lorInto[uint32]), bk(lorInto[uint64]),
		bk(lorInto[int]), bk(lorInto[uint]), bk(lorInto[uintptr]))
	setInts(opLxor, bk(lxorInto[int8]), bk(lxorInto[int16]), bk(lxorInto[int32]), bk(lxorInto[int64]),
		bk(lxorInto[uint8]), bk(lxorInto[uint16]), bk(lxorInto[uint32]), bk(lxorInto[uint64]),
		bk(lxorInto[int]), bk(lxorInto[uint]), bk(lxorInto[uintptr]))
	setInts(opBand, bk(bandInto[int8]), bk(bandInto[int16]), bk(bandInto[int32]), bk(bandInto[int64]),
		bk(bandInto[uint8]), bk(bandInto[uint16]), bk(bandInto[uint32]), bk(bandInto[uint64]),
		bk(bandInto[int]), bk(bandInto[uint]), bk(bandInto[uintptr]))
	setInts(opBor, bk(borInto[int8]), bk(borInto[int16]), bk(borInto[int32]), bk(borInto[int64]),
		bk(borInto[uint8]), bk(borInto[uint16]), bk(borInto[uint32]), bk(borInto[uint64]),
		bk(borInto[int]), bk(borInto[uint]), bk(borInto[uintptr]))
	setInts(opBxor, bk(bxorInto[int8]), bk(bxorInto[int16]), bk(bxorInto[int32]), bk(bxorInto[int64]),
		bk(bxorInto[uint8]), bk(bxorInto[uint16]), bk(bxorInto[uint32]), bk(bxorInto[uint64]),
		bk(bxorInto[int]), bk(bxorInto[uint]), bk(bxorInto[uintptr]))
	setInts(opMaxLoc, bk(maxLocInto[int8]), bk(maxLocInto[int16]), bk(maxLocInto[int32]), bk(maxLocInto[int64]),
		bk(maxLocInto[uint8]), bk(maxLocInto[uint16]), bk(maxLocInto[uint32]), bk(maxLocInto[uint64]),
		bk(maxLocInto[int]), bk(maxLocInto[uint]), bk(maxLocInto[uintptr]))
	setInts(opMinLoc, bk(minLocInto[int8]), bk(minLocInto[int16]), bk(minLocInto[int32]), bk(minLocInto[int64]),
		bk(minLocInto[uint8]), bk(minLocInto[uint16]), bk(minLocInto[uint32]), bk(minLocInto[uint64]),
		bk(minLocInto[int]), bk(minLocInto[uint]), bk(minLocInto[uintptr]))
	// Floats: arithmetic and order.
	for _, f := range []struct {
		k        opKind
		f32, f64 kernel
	}{
		{opSum, bk(sumInto[float32]), bk(sumInto[float64])},
		{opProd, bk(prodInto[float32]), bk(prodInto[float64])},
		{opMax, bk(maxInto[float32]), bk(maxInto[float64])},
		{opMin, bk(minInto[float32]), bk(minInto[float64])},
		{opMaxLoc, bk(maxLocInto[float32]), bk(maxLocInto[float64])},
		{opMinLoc, bk(minLocInto[float32]), bk(minLocInto[float64])},
	} {
		kernels[f.k][dtFloat32], kernels[f.k][dtFloat64] = f.f32, f.f64
	}
	// Complex numbers: arithmetic alone.
	kernels[opSum][dtComplex64], kernels[opSum][dtComplex128] = bk(sumInto[complex64]), bk(sumInto[complex128])
	kernels[opProd][dtComplex64], kernels[opProd][dtComplex128] = bk(prodInto[complex64]), bk(prodInto[complex128])
}

// bk makes a typed kernel a kernel over bytes.
func bk[T any](f func(in, inout []T)) kernel {
	return func(in, inout []byte) { f(bytesAs[T](in), bytesAs[T](inout)) }
}
