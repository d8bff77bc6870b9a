package statshm_test

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tachyon-hpc/tachyon/metrics/statshm"
	"github.com/tachyon-hpc/tachyon/pvar"
)

var exampleMessages = pvar.NewCounter("example_stat_messages", "Messages the example handled.", pvar.WithUnit("messages"))

// A process publishes its variables; a reader (in tachyonstat, another
// process) reads them from the file.
func Example() {
	dir, err := os.MkdirTemp("", "statshm-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	pub, err := statshm.Start(statshm.Config{Dir: dir, Job: "example", Rank: 0, Size: 1, Interval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Stop()
	exampleMessages.Add(3)

	paths, err := statshm.List(dir)
	if err != nil {
		log.Fatal(err)
	}
	r, err := statshm.Open(paths[0])
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		st, err := r.Read()
		if err != nil {
			log.Fatal(err)
		}
		for _, v := range st.Vars {
			if v.Name == "example_stat_messages" && v.Value == 3 { // published at the next interval
				fmt.Printf("job %s rank %d of %d: %s %s %d %s\n", st.Job, st.Rank, st.Size, v.Name, v.Class, v.Value, v.Unit)
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	// Output: job example rank 0 of 1: example_stat_messages counter 3 messages
}
