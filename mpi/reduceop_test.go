package mpi

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// The predefined operations on every type they apply to, against
// references written here with Go's own operators, and ErrOp on every
// type they do not.

// intRef is op on two integers, as MPI defines it.
func intRef[T integer](op opKind, a, b T) T {
	t := func(x bool) T {
		if x {
			return 1
		}
		return 0
	}
	switch op {
	case opSum:
		return a + b
	case opProd:
		return a * b
	case opMax:
		return max(a, b)
	case opMin:
		return min(a, b)
	case opLand:
		return t(a != 0 && b != 0)
	case opLor:
		return t(a != 0 || b != 0)
	case opLxor:
		return t((a != 0) != (b != 0))
	case opBand:
		return a & b
	case opBor:
		return a | b
	case opBxor:
		return a ^ b
	}
	panic("no reference for " + opKindNames[op])
}

func floatRef[T ~float32 | ~float64](op opKind, a, b T) T {
	switch op {
	case opSum:
		return a + b
	case opProd:
		return a * b
	case opMax:
		return max(a, b)
	case opMin:
		return min(a, b)
	}
	panic("no reference for " + opKindNames[op])
}

func complexRef[T ~complex64 | ~complex128](op opKind, a, b T) T {
	switch op {
	case opSum:
		return a + b
	case opProd:
		return a * b
	}
	panic("no reference for " + opKindNames[op])
}

var allOps = []ReduceOp{Sum, Prod, Max, Min, Land, Lor, Lxor, Band, Bor, Bxor}

// opsOn runs Allreduce with every op of allOps on c over T, with rank
// r's element i from gen, checking applicable ones against ref and the
// others for ErrOp.
func opsOn[T Numeric](c *Comm, applies func(opKind) bool, gen func(r, i int) T, ref func(op opKind, a, b T) T) error {
	n, r := c.Size(), c.Rank()
	const m = 7
	for _, op := range allOps {
		send, recv := make([]T, m), make([]T, m)
		for i := range send {
			send[i] = gen(r, i)
		}
		err := Allreduce(c, send, recv, op)
		if !applies(op.kind) {
			if !errors.Is(err, ErrOp) {
				return fmt.Errorf("%v on %v: %v, want ErrOp", op, dtypeOf[T](), err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%v on %v: %w", op, dtypeOf[T](), err)
		}
		for i := range recv {
			want := gen(0, i)
			for k := 1; k < n; k++ {
				want = ref(op.kind, want, gen(k, i))
			}
			if recv[i] != want {
				return fmt.Errorf("%v on %v: [%d] = %v, want %v", op, dtypeOf[T](), i, recv[i], want)
			}
		}
	}
	return nil
}

func ints(op opKind) bool      { return op <= opBxor }
func floats(op opKind) bool    { return op <= opMin }
func complexes(op opKind) bool { return op <= opProd }

func intGen[T integer](r, i int) T { return T((r*5 + i*3) % 7) } // 0..6: logical and bitwise ops get zeros too
func floatGen[T ~float32 | ~float64](r, i int) T {
	return T((r*5+i*3)%7) - 2.5
}
func complexGen[T ~complex64 | ~complex128](r, i int) T {
	return T(complex(float64((r+i)%3), float64(r-i)))
}

type celsiusT float64 // a named type: its underlying type's operations

func TestReduceOpsEveryType(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		err := Run(n, func(c *Comm) error {
			for _, f := range []func() error{
				func() error { return opsOn(c, ints, intGen[int8], intRef[int8]) },
				func() error { return opsOn(c, ints, intGen[int16], intRef[int16]) },
				func() error { return opsOn(c, ints, intGen[int32], intRef[int32]) },
				func() error { return opsOn(c, ints, intGen[int64], intRef[int64]) },
				func() error { return opsOn(c, ints, intGen[uint8], intRef[uint8]) },
				func() error { return opsOn(c, ints, intGen[uint16], intRef[uint16]) },
				func() error { return opsOn(c, ints, intGen[uint32], intRef[uint32]) },
				func() error { return opsOn(c, ints, intGen[uint64], intRef[uint64]) },
				func() error { return opsOn(c, ints, intGen[int], intRef[int]) },
				func() error { return opsOn(c, ints, intGen[uint], intRef[uint]) },
				func() error { return opsOn(c, ints, intGen[uintptr], intRef[uintptr]) },
				func() error { return opsOn(c, floats, floatGen[float32], floatRef[float32]) },
				func() error { return opsOn(c, floats, floatGen[float64], floatRef[float64]) },
				func() error { return opsOn(c, floats, floatGen[celsiusT], floatRef[celsiusT]) },
				func() error { return opsOn(c, complexes, complexGen[complex64], complexRef[complex64]) },
				func() error { return opsOn(c, complexes, complexGen[complex128], complexRef[complex128]) },
			} {
				if err := f(); err != nil {
					return err
				}
			}
			return locOps(c)
		})
		if err != nil {
			t.Fatalf("%d ranks: %v", n, err)
		}
	}
}

// locOps checks MaxLoc and MinLoc on int32 pairs, ties to the smaller
// index, and ErrOp on complex numbers.
func locOps(c *Comm) error {
	n, r := c.Size(), c.Rank()
	pairs := []int32{int32(r % 2), int32(r), int32(-r), int32(r)} // value, index; value, index
	out := make([]int32, 4)
	if err := Allreduce(c, pairs, out, MaxLoc); err != nil {
		return err
	}
	wantMax := []int32{min(int32(n-1), 1), min(int32(n-1), 1), 0, 0}
	if !slices.Equal(out, wantMax) {
		return fmt.Errorf("MaxLoc %v, want %v", out, wantMax)
	}
	if err := Allreduce(c, pairs, out, MinLoc); err != nil {
		return err
	}
	if want := []int32{0, 0, int32(-(n - 1)), int32(n - 1)}; !slices.Equal(out, want) {
		return fmt.Errorf("MinLoc %v, want %v", out, want)
	}
	if err := Allreduce(c, []complex64{1, 2}, make([]complex64, 2), MaxLoc); !errors.Is(err, ErrOp) {
		return fmt.Errorf("MaxLoc on complex64: %v, want ErrOp", err)
	}
	return nil
}

// TestReduceOpString: the operations name themselves.
func TestReduceOpString(t *testing.T) {
	for op, want := range map[ReduceOp]string{Sum: "Sum", MaxLoc: "MaxLoc", {}: "no operation"} {
		if op.String() != want {
			t.Errorf("%v.String() = %q", want, op.String())
		}
	}
	if !Sum.Commutative() || NewReduceOp(func(in, inout []int8) {}, false).Commutative() || (ReduceOp{}).Commutative() {
		t.Error("Commutative is wrong")
	}
}
