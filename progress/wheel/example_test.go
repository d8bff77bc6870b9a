package wheel_test

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/progress/wheel"
)

// event embeds its Timer: the wheel links pending timers through their
// own fields and allocates nothing.
type event struct {
	wheel.Timer
	name string
}

// Timers fire in order of their due counts as the wheel's time advances,
// never before it; a cancelled one never fires.
func Example() {
	w := wheel.New(4, 0) // a tick of 16 counts, time 0
	events := []*event{{name: "a"}, {name: "b"}, {name: "c"}}
	for i, ev := range events {
		ev.Init(func(t *wheel.Timer) { fmt.Printf("%s fired at %d (due %d)\n", ev.name, w.Now(), t.Due()) })
		if err := w.Schedule(&ev.Timer, uint64(100*(i+1))); err != nil {
			log.Fatal(err)
		}
	}
	w.Cancel(&events[1].Timer)
	fmt.Println("pending:", w.Len())
	fmt.Println("fired:", w.Advance(150))
	fmt.Println("fired:", w.Advance(1000))
	fmt.Println("pending:", w.Len())
	// Output:
	// pending: 2
	// a fired at 150 (due 100)
	// fired: 1
	// c fired at 1000 (due 300)
	// fired: 1
	// pending: 0
}
