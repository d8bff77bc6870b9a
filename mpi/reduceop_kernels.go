package mpi

// The predefined operations' kernels, one generic function per operation
// over the element types it applies to. Each loop is unrolled by four
// with one bounds check up front, so that the compiler, which does not
// emit vector instructions, keeps four independent operations in flight:
// BenchmarkReduceKernel compares Sum on []float64 with a plain loop.

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~int | ~uint | ~uintptr
}

type ordered interface {
	integer | ~float32 | ~float64
}

type arith interface {
	ordered | ~complex64 | ~complex128
}

func sumInto[T arith](in, inout []T) {
	in = in[:len(inout)]
	i := 0
	for ; i+4 <= len(inout); i += 4 {
		a, b := in[i:i+4:i+4], inout[i:i+4:i+4]
		b[0] += a[0]
		b[1] += a[1]
		b[2] += a[2]
		b[3] += a[3]
	}
	for ; i < len(inout); i++ {
		inout[i] += in[i]
	}
}

func prodInto[T arith](in, inout []T) {
	in = in[:len(inout)]
	i := 0
	for ; i+4 <= len(inout); i += 4 {
		a, b := in[i:i+4:i+4], inout[i:i+4:i+4]
		b[0] *= a[0]
		b[1] *= a[1]
		b[2] *= a[2]
		b[3] *= a[3]
	}
	for ; i < len(inout); i++ {
		inout[i] *= in[i]
	}
}

// maxInto keeps the larger of each pair; a NaN in either wins, as in
// the built-in max.
func maxInto[T ordered](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = max(in[i], inout[i])
	}
}

func minInto[T ordered](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = min(in[i], inout[i])
	}
}

func truth[T integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

func landInto[T integer](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = truth[T](in[i] != 0 && inout[i] != 0)
	}
}

func lorInto[T integer](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = truth[T](in[i] != 0 || inout[i] != 0)
	}
}

func lxorInto[T integer](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = truth[T]((in[i] != 0) != (inout[i] != 0))
	}
}

func bandInto[T integer](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] &= in[i]
	}
}

func borInto[T integer](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] |= in[i]
	}
}

func bxorInto[T integer](in, inout []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] ^= in[i]
	}
}

// maxLocInto combines (value, index) pairs: the larger value, and of
// equal values the smaller index (MPI_MAXLOC).
func maxLocInto[T ordered](in, inout []T) {
	in = in[:len(inout)]
	for i := 0; i+1 < len(inout); i += 2 {
		v, x := in[i], in[i+1]
		if v > inout[i] || v == inout[i] && x < inout[i+1] {
			inout[i], inout[i+1] = v, x
		}
	}
}

// minLocInto is maxLocInto for the smaller value (MPI_MINLOC).
func minLocInto[T ordered](in, inout []T) {
	in = in[:len(inout)]
	for i := 0; i+1 < len(inout); i += 2 {
		v, x := in[i], in[i+1]
		if v < inout[i] || v == inout[i] && x < inout[i+1] {
			inout[i], inout[i+1] = v, x
		}
	}
}
