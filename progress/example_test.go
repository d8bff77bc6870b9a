package progress_test

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/progress"
)

// inbox is a Poller: a source of work the engine drives, here a queue
// that completes a request when it finds a message.
type inbox struct {
	queue []string
	req   *progress.Completion
	got   string
}

func (b *inbox) Poll() int {
	if len(b.queue) == 0 {
		return 0
	}
	b.got, b.queue = b.queue[0], b.queue[1:]
	b.req.MarkDone()
	return 1
}

// A goroutine waiting on a request drives the engine's pollers and timers
// itself: Wait returns once a poller has completed the request, and a
// timer request completes once the clock passes its due time.
func Example() {
	e, err := progress.New()
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	var req progress.Completion
	in := &inbox{queue: []string{"hello"}, req: &req}
	defer e.Register(in)()
	e.Wait(&req)
	fmt.Println("received:", in.got)

	start := progress.Wtime()
	t, err := e.NewTimer(0.001) // one millisecond from now
	if err != nil {
		log.Fatal(err)
	}
	if err := t.Wait(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("timer done, no earlier than its due time:", progress.Wtime()-start >= 0.001)
	// Output:
	// received: hello
	// timer done, no earlier than its due time: true
}
