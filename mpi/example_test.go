package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// Two ranks as goroutines: rank 0 sends, rank 1 receives.
func ExampleRun() {
	err := mpi.Run(2, func(world *mpi.Comm) error {
		if world.Rank() == 0 {
			return world.Send([]byte("hello"), 1, 7)
		}
		buf := make([]byte, 16)
		st, err := world.Recv(buf, 0, 7)
		if err != nil {
			return err
		}
		fmt.Printf("rank 1 got %q from rank %d, tag %d\n", buf[:st.Count], st.Source, st.Tag)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: rank 1 got "hello" from rank 0, tag 7
}

// Nonblocking receives from every other rank, completed in any order.
func ExampleWaitall() {
	mpi.Run(4, func(world *mpi.Comm) error {
		if world.Rank() != 0 {
			return world.Send([]byte{byte(world.Rank())}, 0, 0)
		}
		bufs := make([][]byte, world.Size()-1)
		reqs := make([]*mpi.Request, world.Size()-1)
		for i := range reqs {
			bufs[i] = make([]byte, 1)
			reqs[i], _ = world.Irecv(bufs[i], i+1, 0)
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return err
		}
		fmt.Println(bufs, reqs[0] == nil)
		return nil
	})
	// Output: [[1] [2] [3]] true
}

// Split the world into even and odd ranks.
func ExampleComm_Split() {
	mpi.Run(4, func(world *mpi.Comm) error {
		sub, err := world.Split(world.Rank()%2, world.Rank())
		if err != nil {
			return err
		}
		if world.Rank() == 3 {
			fmt.Printf("world rank 3 is rank %d of %d odd ranks\n", sub.Rank(), sub.Size())
		}
		return sub.Free()
	})
	// Output: world rank 3 is rank 1 of 2 odd ranks
}

// A timer request waited on together with a receive.
func ExampleTimerCreate() {
	mpi.Run(1, func(world *mpi.Comm) error {
		timer, err := mpi.TimerCreate(0.01)
		if err != nil {
			return err
		}
		recv, _ := world.Irecv(make([]byte, 8), mpi.AnySource, 1)
		reqs := []*mpi.Request{recv, timer}
		i, _, _ := mpi.Waitany(reqs)
		fmt.Println("first to complete:", i)
		recv.Cancel()
		st, _ := recv.Wait()
		fmt.Println("receive cancelled:", st.Cancelled)
		return nil
	})
	// Output:
	// first to complete: 1
	// receive cancelled: true
}

// Errors match their class with errors.Is.
func ExampleErrorClass() {
	mpi.Run(2, func(world *mpi.Comm) error {
		if world.Rank() == 0 {
			err := world.Send(nil, 5, 0)
			fmt.Println(mpi.ErrorClass(err) == mpi.ErrRank)
		}
		return nil
	})
	// Output: true
}

// A receive with a deadline: it times out with nothing consumed, and the
// message sent afterwards goes to the next receive.
func ExampleComm_RecvContext() {
	mpi.Run(2, func(world *mpi.Comm) error {
		if world.Rank() == 0 {
			if _, err := world.Recv(nil, 1, 9); err != nil { // rank 1 has given up
				return err
			}
			return world.Send([]byte("late"), 1, 7)
		}
		buf := make([]byte, 16)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := world.RecvContext(ctx, buf, 0, 7)
		fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, mpi.ErrCanceled))
		if err := world.Send(nil, 0, 9); err != nil {
			return err
		}
		st, err := world.RecvContext(context.Background(), buf, 0, 7)
		if err != nil {
			return err
		}
		fmt.Printf("then %q\n", buf[:st.Count])
		return nil
	})
	// Output:
	// true true
	// then "late"
}

// Messages of any size, each received whole into a buffer of the pool:
// the receiver does not know their sizes beforehand.
func ExampleComm_RecvMessage() {
	mpi.Run(2, func(world *mpi.Comm) error {
		if world.Rank() == 0 {
			for _, s := range []string{"short", strings.Repeat("long ", 20000)} {
				if err := world.Send([]byte(s), 1, 3); err != nil {
					return err
				}
			}
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range 2 {
			m, err := world.RecvMessage(ctx, mpi.AnySource, 3)
			if err != nil {
				return err
			}
			fmt.Printf("%d bytes from rank %d: %.10q\n", len(m.Data), m.Source, m.Data)
			m.Release() // m.Data must not be used after
		}
		return nil
	})
	// Output:
	// 5 bytes from rank 0: "short"
	// 100000 bytes from rank 0: "long long "
}

// Goroutines of one rank receiving from the same source and tag: each
// Mprobe takes its message, so the buffer sized for it gets that message
// and no other goroutine's.
func ExampleComm_Mprobe() {
	mpi.Run(2, func(world *mpi.Comm) error {
		if world.Rank() == 0 {
			for _, n := range []int{10, 20000, 300} {
				if err := world.Send(make([]byte, n), 1, 0); err != nil {
					return err
				}
			}
			return nil
		}
		var wg sync.WaitGroup
		sizes := make([]int, 3)
		for g := range sizes {
			wg.Go(func() {
				m, st, err := world.Mprobe(0, 0)
				if err != nil {
					return
				}
				buf := make([]byte, st.Count)
				if st, err := m.Recv(buf); err == nil {
					sizes[g] = st.Count
				}
			})
		}
		wg.Wait()
		slices.Sort(sizes)
		fmt.Println(sizes)
		return nil
	})
	// Output: [10 300 20000]
}
