package mpi

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// viewRoundTrip checks that AsBytes and FromBytes share s's memory and give
// it back unchanged.
func viewRoundTrip[T Numeric](t *testing.T, s []T) {
	t.Helper()
	var zero T
	b := AsBytes(s)
	if len(b) != len(s)*int(unsafe.Sizeof(zero)) {
		t.Fatalf("%T: %d bytes for %d elements", zero, len(b), len(s))
	}
	if unsafe.Pointer(unsafe.SliceData(b)) != unsafe.Pointer(unsafe.SliceData(s)) {
		t.Fatalf("%T: AsBytes copied", zero)
	}
	back, err := FromBytes[T](b)
	if err != nil {
		t.Fatalf("%T: %v", zero, err)
	}
	if len(back) != len(s) || unsafe.SliceData(back) != unsafe.SliceData(s) {
		t.Fatalf("%T: FromBytes gave %d elements at another address", zero, len(back))
	}
	for i := range s {
		if back[i] != s[i] && s[i] == s[i] { // NaN != NaN
			t.Fatalf("%T: element %d is %v, want %v", zero, i, back[i], s[i])
		}
	}
}

type celsius float64 // a named type, allowed by the ~ in Numeric

func TestViewRoundTrip(t *testing.T) {
	viewRoundTrip(t, []int8{-1, 2, math.MinInt8})
	viewRoundTrip(t, []int16{-1, math.MaxInt16})
	viewRoundTrip(t, []int32{1, -2, math.MinInt32})
	viewRoundTrip(t, []int64{math.MaxInt64, -3})
	viewRoundTrip(t, []uint8{0, 255})
	viewRoundTrip(t, []uint16{65535})
	viewRoundTrip(t, []uint32{1 << 31})
	viewRoundTrip(t, []uint64{1 << 63, 5})
	viewRoundTrip(t, []float32{1.5, float32(math.Inf(-1))})
	viewRoundTrip(t, []float64{math.Pi, math.NaN(), -0.0})
	viewRoundTrip(t, []int{-7, math.MaxInt})
	viewRoundTrip(t, []uint{math.MaxUint})
	viewRoundTrip(t, []uintptr{0xdeadbeef})
	viewRoundTrip(t, []complex64{complex(1, -2)})
	viewRoundTrip(t, []complex128{complex(math.E, 3), 0})
	viewRoundTrip(t, []celsius{-40, 100})
}

func TestViewSharesMemory(t *testing.T) {
	s := []uint32{0x01020304, 0}
	b := AsBytes(s)
	// The bytes are the host's representation.
	if binary.NativeEndian.Uint32(b) != 0x01020304 {
		t.Fatalf("bytes %x are not the number in host byte order", b[:4])
	}
	// A write through the bytes is a write to the numbers, as a receive
	// into them would be.
	binary.NativeEndian.PutUint32(b[4:], 77)
	if s[1] != 77 {
		t.Fatalf("write through AsBytes did not reach the slice: %v", s)
	}
	f, err := FromBytes[uint32](b)
	if err != nil {
		t.Fatal(err)
	}
	f[0] = 9
	if s[0] != 9 {
		t.Fatalf("write through FromBytes did not reach the memory: %v", s)
	}
}

func TestViewEmpty(t *testing.T) {
	if b := AsBytes([]float64{}); b != nil {
		t.Errorf("AsBytes(empty) = %v, want nil", b)
	}
	if b := AsBytes[int](nil); b != nil {
		t.Errorf("AsBytes(nil) = %v, want nil", b)
	}
	if s, err := FromBytes[float64](nil); s != nil || err != nil {
		t.Errorf("FromBytes(nil) = %v, %v", s, err)
	}
	if s, err := FromBytes[complex128]([]byte{}); s != nil || err != nil {
		t.Errorf("FromBytes(empty) = %v, %v", s, err)
	}
}

func TestViewErrors(t *testing.T) {
	// A buffer aligned for every type: the backing array of a []uint64.
	words := make([]uint64, 4)
	buf := AsBytes(words)

	// Lengths that are not whole elements.
	for _, n := range []int{1, 3, 7, 9} {
		_, err := FromBytes[uint64](buf[:n])
		mustClass(t, err, ErrBuffer)
	}
	_, err := FromBytes[complex128](buf[:24])
	mustClass(t, err, ErrBuffer)
	_, err = FromBytes[int16](buf[:3])
	mustClass(t, err, ErrBuffer)

	// Starts not aligned for the type.
	for _, off := range []int{1, 2, 3, 4, 5, 6, 7} {
		_, err := FromBytes[float64](buf[off : off+8])
		mustClass(t, err, ErrBuffer)
	}
	for _, off := range []int{1, 2, 3} {
		_, err := FromBytes[int32](buf[off : off+4])
		mustClass(t, err, ErrBuffer)
	}
	_, err = FromBytes[uint16](buf[1:3])
	mustClass(t, err, ErrBuffer)

	// Aligned starts inside the buffer are fine, and bytes never misalign.
	if s, err := FromBytes[int32](buf[4:12]); err != nil || len(s) != 2 {
		t.Errorf("FromBytes[int32] at offset 4: %v, %v", s, err)
	}
	if s, err := FromBytes[int8](buf[3:8]); err != nil || len(s) != 5 {
		t.Errorf("FromBytes[int8] at offset 3: %v, %v", s, err)
	}
}

func ExampleAsBytes() {
	// Send a row of a matrix of float64 as bytes, and view the received
	// bytes as float64 again, with no copy on either side.
	row := []float64{1.5, -2, 3.25}
	msg := AsBytes(row) // what Send would carry
	fmt.Println(len(msg), "bytes")

	got, err := FromBytes[float64](msg) // what a receiver makes of them
	fmt.Println(got, err)
	// Output:
	// 24 bytes
	// [1.5 -2 3.25] <nil>
}
