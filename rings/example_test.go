package rings_test

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/rings"
)

// A record ring in ordinary memory, with its writer and its reader: the
// same calls work on a ring in a Segment shared between processes.
func Example() {
	const capacity = 1024
	r, err := rings.NewRecordRing(rings.AlignedBytes(rings.RecordRingSize(capacity)), capacity)
	if err != nil {
		log.Fatal(err)
	}
	w, err := r.Writer()
	if err != nil {
		log.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		log.Fatal(err)
	}
	for i, s := range []string{"hello", "shared", "memory"} {
		if err := w.Write(uint32(i+1), []byte(s)); err != nil {
			log.Fatal(err)
		}
	}
	n, err := rd.Poll(func(typ uint32, p []byte) { fmt.Printf("record of type %d: %s\n", typ, p) }, 16)
	fmt.Println(n, "records,", err)
	fmt.Println("largest record:", r.MaxPayload(), "bytes")
	// Output:
	// record of type 1: hello
	// record of type 2: shared
	// record of type 3: memory
	// 3 records, <nil>
	// largest record: 120 bytes
}
