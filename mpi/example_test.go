package mpi_test

import (
	"context"
	"errors"
	"fmt"
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
