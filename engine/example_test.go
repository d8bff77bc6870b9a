package engine_test

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/engine"
)

// Two ranks of a world of goroutines, one message: the engine matches it
// by context, source and tag, as the mpi facade's communicators ask it to.
func Example() {
	w, err := engine.NewWorld(2)
	if err != nil {
		log.Fatal(err)
	}
	const ctx, tag = 0, 7
	sent := make(chan error, 1)
	go func() { sent <- w.Endpoint(0).Send([]byte("hello, rank 1"), 1, tag, ctx, engine.Standard) }()

	buf := make([]byte, 64)
	st, err := w.Endpoint(1).Recv(buf, engine.AnySource, tag, ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := <-sent; err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank 1 got %q from rank %d, tag %d\n", buf[:st.Count], st.Source, st.Tag)
	for i := range w.Size() {
		if err := w.Endpoint(i).Close(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// rank 1 got "hello, rank 1" from rank 0, tag 7
}
