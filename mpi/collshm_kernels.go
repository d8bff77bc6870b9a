package mpi

// Fused kernels of the large shared-memory allreduce (collshm_allreduce.go):
// out = a op b in one pass, where the kernels of reduceop.go (inout = in
// op inout) need a copy of b into out first. They exist for the
// arithmetic and order operations, the common ones on long vectors;
// others take the copy and the kernel.

// kernel3 applies an operation to byte views of three vectors of one
// type: out = a op b, element by element; out may be a or b.
type kernel3 func(a, b, out []byte)

// kernels3 holds the fused kernels by operation and type; nil where there
// is none.
var kernels3 [opUser][dtCount]kernel3

// kernel3For returns op's fused kernel on dt, or nil.
func kernel3For(op ReduceOp, dt dtype) kernel3 {
	if op.kind >= opUser || dt >= dtCount {
		return nil
	}
	return kernels3[op.kind][dt]
}

func init() {
	arith3[int8]()
	arith3[int16]()
	arith3[int32]()
	arith3[int64]()
	arith3[uint8]()
	arith3[uint16]()
	arith3[uint32]()
	arith3[uint64]()
	arith3[int]()
	arith3[uint]()
	arith3[uintptr]()
	arith3[float32]()
	arith3[float64]()
	kernels3[opSum][dtComplex64], kernels3[opProd][dtComplex64] = bk3(sum3[complex64]), bk3(prod3[complex64])
	kernels3[opSum][dtComplex128], kernels3[opProd][dtComplex128] = bk3(sum3[complex128]), bk3(prod3[complex128])
}

// arith3 registers T's fused Sum, Prod, Max and Min.
func arith3[T ordered]() {
	dt := dtypeOf[T]()
	kernels3[opSum][dt], kernels3[opProd][dt] = bk3(sum3[T]), bk3(prod3[T])
	kernels3[opMax][dt], kernels3[opMin][dt] = bk3(max3[T]), bk3(min3[T])
}

// bk3 makes a typed fused kernel one over bytes.
func bk3[T any](f func(a, b, out []T)) kernel3 {
	return func(a, b, out []byte) { f(bytesAs[T](a), bytesAs[T](b), bytesAs[T](out)) }
}

// sum3 is unrolled by four with one bounds check, as sumInto.
func sum3[T arith](a, b, out []T) {
	a, b = a[:len(out)], b[:len(out)]
	i := 0
	for ; i+4 <= len(out); i += 4 {
		x, y, o := a[i:i+4:i+4], b[i:i+4:i+4], out[i:i+4:i+4]
		o[0] = x[0] + y[0]
		o[1] = x[1] + y[1]
		o[2] = x[2] + y[2]
		o[3] = x[3] + y[3]
	}
	for ; i < len(out); i++ {
		out[i] = a[i] + b[i]
	}
}

func prod3[T arith](a, b, out []T) {
	a, b = a[:len(out)], b[:len(out)]
	i := 0
	for ; i+4 <= len(out); i += 4 {
		x, y, o := a[i:i+4:i+4], b[i:i+4:i+4], out[i:i+4:i+4]
		o[0] = x[0] * y[0]
		o[1] = x[1] * y[1]
		o[2] = x[2] * y[2]
		o[3] = x[3] * y[3]
	}
	for ; i < len(out); i++ {
		out[i] = a[i] * b[i]
	}
}

// max3 is maxInto's built-in max: a NaN in either wins.
func max3[T ordered](a, b, out []T) {
	a, b = a[:len(out)], b[:len(out)]
	for i := range out {
		out[i] = max(a[i], b[i])
	}
}

func min3[T ordered](a, b, out []T) {
	a, b = a[:len(out)], b[:len(out)]
	for i := range out {
		out[i] = min(a[i], b[i])
	}
}
