package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// RecvMessage returns every size whole, from a rank or AnySource, with
// the tag or AnyTag; a context that ends first takes nothing; ProcNull
// returns at once.
var scRecvMessage = scenario("recvmessage", func(c *Comm) error {
	sizes := append([]int{3 << 20}, mprobeSizes...) // past the eager limit, and by far
	if c.Rank() == 0 {
		if _, err := c.Recv(nil, 1, 99); err != nil { // rank 1's contexts have ended
			return err
		}
		for k, n := range sizes {
			if err := c.Send(pattern(n, k), 1, k); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.RecvMessage(ctx, 0, 0); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) || ErrorClass(err) != ErrCanceled {
		return fmt.Errorf("RecvMessage past its deadline: %v", err)
	}
	cctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.RecvMessage(cctx, AnySource, AnyTag); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		return fmt.Errorf("RecvMessage with its context cancelled: %v", err)
	}
	if _, _, err := c.MprobeContext(cctx, AnySource, AnyTag); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		return fmt.Errorf("MprobeContext with its context cancelled: %v", err)
	}
	if err := c.Send(nil, 0, 99); err != nil {
		return err
	}
	live, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	for k, n := range sizes {
		src, tag := 0, k
		if k%2 == 1 {
			src, tag = AnySource, AnyTag
		}
		rv, err := c.RecvMessage(live, src, tag)
		if err != nil || rv.Source != 0 || rv.Tag != k || rv.Count != n || len(rv.Data) != n || !bytes.Equal(rv.Data, pattern(n, k)) {
			return fmt.Errorf("message %d (%d bytes): %+v, %d bytes, %v", k, n, rv.Status, len(rv.Data), err)
		}
		rv.Release()
		if rv.Data != nil {
			return errors.New("Data left after Release")
		}
		rv.Release()
	}
	rv, err := c.RecvMessage(context.Background(), ProcNull, 5)
	if err != nil || rv.Status != procNullStatus || rv.Data != nil {
		return fmt.Errorf("RecvMessage from ProcNull: %+v %v", rv, err)
	}
	rv.Release()
	if _, err := c.RecvMessage(nil, 0, 0); ErrorClass(err) != ErrArg {
		return fmt.Errorf("RecvMessage with a nil context: %v", err)
	}
	return nil
})

func TestRecvMessage(t *testing.T) { bothEager(t, 2, scRecvMessage) }

// TestRecvMessageSenderDies: a sender that died after announcing a
// rendezvous message, its data never sent: RecvMessage fails with
// ErrProcFailed and returns no data. (The death between the probe and the
// receive inside RecvMessage is Message.Recv's, TestMprobeSenderDies.)
func TestRecvMessageSenderDies(t *testing.T) {
	err := Run(2, func(c *Comm) error {
		if c.Rank() == 0 {
			if _, err := c.Isend(pattern(1<<20, 1), 1, 7); err != nil {
				return err
			}
			_, err := c.Recv(nil, 1, 8)
			return err // leaves without Finalize
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.Probe(0, 7); err != nil { // here, not yet taken
			return err
		}
		if err := c.Send(nil, 0, 8); err != nil {
			return err
		}
		if _, err := c.Probe(0, 9); ErrorClass(err) != ErrProcFailed {
			return fmt.Errorf("probe of the dead rank: %v", err)
		}
		rv, err := c.RecvMessage(ctx, 0, 7)
		if ErrorClass(err) != ErrProcFailed || rv.Data != nil {
			return fmt.Errorf("RecvMessage of a dead sender's rendezvous message: %+v %v", rv.Status, err)
		}
		return finalizedAlone(c.Finalize())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReceivedRelease: Release gives a buffer back once, however many
// copies of the Received are released, so the pool never lends one
// buffer twice; a message past the largest class gets a buffer of its
// own; the classes fit their sizes.
func TestReceivedRelease(t *testing.T) {
	a := lend(100)
	if len(a.Data) != 100 || cap(a.Data) != 128 {
		t.Fatalf("a 100-byte message got %d bytes of %d", len(a.Data), cap(a.Data))
	}
	copyOfA := a
	a.Release()
	a.Release()
	copyOfA.Release() // stale: must not put the buffer back a second time
	x, y := lend(100), lend(100)
	if &x.Data[0] == &y.Data[0] {
		t.Fatal("the pool lent one buffer twice after a double Release")
	}
	x.Release()
	copyOfA.Release() // the buffer may be x's again: still stale
	z, w := lend(100), lend(100)
	if &z.Data[0] == &w.Data[0] {
		t.Fatal("the pool lent one buffer twice after a stale Release")
	}
	z.Release()
	w.Release()
	y.Release()
	var zero Received
	zero.Release()
	for _, c := range []struct{ n, class int }{
		{1, 0}, {64, 0}, {65, 1}, {128, 1}, {129, 2}, {1 << 26, maxMsgClass - minMsgClass}, {1<<26 + 1, -1},
	} {
		if k := msgClass(c.n); k != c.class {
			t.Errorf("msgClass(%d) = %d, want %d", c.n, k, c.class)
		}
	}
	big := lend(1<<26 + 1)
	if big.buf.class != -1 || len(big.Data) != 1<<26+1 {
		t.Fatalf("a message past the largest class: class %d, %d bytes", big.buf.class, len(big.Data))
	}
	big.Release()
}

// TestRecvMessageAllocs: once the pool is warm, RecvMessage and Release
// allocate nothing, and no more than Recv into a buffer of the caller's
// where the send itself allocates (a rendezvous's Isend).
func TestRecvMessageAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := Run(1, func(c *Comm) error {
		for _, n := range []int{8, 4096, 64 << 10} {
			out, in := make([]byte, n), make([]byte, n)
			var failed error
			fail := func(err error) {
				if err != nil && failed == nil {
					failed = err
				}
			}
			recv := func() {
				r, err := c.Isend(out, 0, 1)
				fail(err)
				_, err = c.Recv(in, 0, 1)
				fail(err)
				_, err = r.Wait()
				fail(err)
			}
			recvMessage := func() {
				r, err := c.Isend(out, 0, 1)
				fail(err)
				rv, err := c.RecvMessage(ctx, 0, 1)
				fail(err)
				rv.Release()
				_, err = r.Wait()
				fail(err)
			}
			recv()
			recvMessage()
			base := testing.AllocsPerRun(200, recv)
			got := testing.AllocsPerRun(200, recvMessage)
			if failed != nil {
				return failed
			}
			t.Logf("%d bytes: Isend, Recv, Wait: %v allocations; Isend, RecvMessage, Release, Wait: %v", n, base, got)
			if got > base {
				return fmt.Errorf("%d bytes: Isend, RecvMessage and Wait allocate %v times, Isend, Recv and Wait %v", n, got, base)
			}
			if n <= 4096 {
				if got := testing.AllocsPerRun(200, func() {
					fail(c.Send(out, 0, 2))
					rv, err := c.RecvMessage(ctx, 0, 2)
					fail(err)
					rv.Release()
				}); got != 0 || failed != nil {
					return fmt.Errorf("%d bytes: Send, RecvMessage and Release allocate %v times (%v)", n, got, failed)
				}
			}
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRecvMessage: rank 0 streams messages to rank 1, which takes
// each with Recv into a buffer of its own ("recv") or with RecvMessage
// and Release ("recvmessage"); an acknowledgement every 16 messages
// keeps the queues short.
func BenchmarkRecvMessage(b *testing.B) {
	for _, n := range []int{64, 4 << 10, 64 << 10, 1 << 20} {
		for _, whole := range []bool{false, true} {
			name := "recv"
			if whole {
				name = "recvmessage"
			}
			b.Run(fmt.Sprintf("%d/%s", n, name), func(b *testing.B) {
				ctx := context.Background()
				iters := b.N
				b.SetBytes(int64(n))
				b.ReportAllocs()
				err := Run(2, func(c *Comm) error {
					buf := make([]byte, n)
					if c.Rank() == 0 {
						b.ResetTimer()
					}
					for i := range iters {
						if c.Rank() == 0 {
							if err := c.Send(buf, 1, 1); err != nil {
								return err
							}
							if i%16 == 15 {
								if _, err := c.Recv(nil, 1, 2); err != nil {
									return err
								}
							}
							continue
						}
						if whole {
							rv, err := c.RecvMessage(ctx, 0, 1)
							if err != nil {
								return err
							}
							rv.Release()
						} else if _, err := c.Recv(buf, 0, 1); err != nil {
							return err
						}
						if i%16 == 15 {
							if err := c.Send(nil, 0, 2); err != nil {
								return err
							}
						}
					}
					if c.Rank() == 0 {
						b.StopTimer()
					}
					return c.Finalize()
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// TestMprobeIntercomm: across an intercommunicator (Accept and Connect
// between two worlds), a matched probe and RecvMessage name the source by
// its rank in the remote group.
func TestMprobeIntercomm(t *testing.T) {
	send := func(inter *Comm) error {
		for r := range 2 {
			if err := inter.Send(pattern(1000*(inter.Rank()+1), inter.Rank()), r, 4); err != nil {
				return err
			}
		}
		return nil
	}
	recv := func(inter *Comm) error {
		got := map[int]bool{}
		for k := range 2 {
			var st Status
			var data []byte
			if k == 0 {
				m, pst, err := inter.Mprobe(AnySource, 4)
				if err != nil {
					return err
				}
				data = make([]byte, pst.Count)
				if st, err = m.Recv(data); err != nil {
					return err
				}
			} else {
				rv, err := inter.RecvMessage(context.Background(), AnySource, 4)
				if err != nil {
					return err
				}
				st, data = rv.Status, bytes.Clone(rv.Data)
				rv.Release()
			}
			if got[st.Source] || st.Count != 1000*(st.Source+1) || !bytes.Equal(data, pattern(st.Count, st.Source)) {
				return fmt.Errorf("message %d: status %+v, %d bytes", k, st, len(data))
			}
			got[st.Source] = true
		}
		return nil
	}
	twoWorlds(t, 2, 2, recv, send)
}

// TestRecvMessageSession: a service receives requests of sizes it does
// not know beforehand from a client that dialed it.
func TestRecvMessageSession(t *testing.T) {
	sc, cc := echoPair(t, newTestSession(t), newTestSession(t))
	sizes := []int{8, 20000, 300000}
	errs := make(chan error, 1)
	go func() {
		for k, n := range sizes {
			if err := cc.Send(pattern(n, k), 0, 6); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k, n := range sizes {
		rv, err := sc.RecvMessage(ctx, AnySource, 6)
		if err != nil || rv.Source != 0 || !bytes.Equal(rv.Data, pattern(n, k)) {
			t.Fatalf("request %d (%d bytes): %+v, %d bytes, %v", k, n, rv.Status, len(rv.Data), err)
		}
		rv.Release()
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
