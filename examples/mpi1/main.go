// Command mpi1 runs the first example of process groups of the 1993 MPI1
// proposal (section 3.2.3, Figures 1 and 2), written against package mpi1:
// the spectral transform of a field on a longitude/latitude grid spread
// over a P x Q mesh of processes. PARTG makes a row group and a column
// group of each process; in the row group's context (PUSHG) a Fourier
// transform over longitude runs on processes numbered 0..Q-1, and in the
// column group's a weighted sum over latitude on processes numbered
// 0..P-1. Each routine is written for processes 0..n-1 of ALL and knows
// nothing of the mesh.
//
// As a job of processes (P*Q of them):
//
//	tachyonrun -n 6 go run ./examples/mpi1 -p 2 -q 3
//
// or, without a launcher, as goroutines of one process:
//
//	go run ./examples/mpi1 -p 2 -q 3
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/mpi/mpi1"
)

// The message types of the two phases' routines.
const (
	typeSample = 1 // a grid value, to every process of the row
	typeCoeff  = 2 // a Fourier coefficient, to the column's process 0
)

func main() {
	p := flag.Int("p", 2, "rows of the process mesh (latitude)")
	q := flag.Int("q", 3, "columns of the process mesh (longitude)")
	flag.Parse()
	if err := mpi.Main(*p**q, func(world *mpi.Comm) error { return run(world, *p, *q) }); err != nil {
		log.Fatal(err)
	}
}

// run is one process of the example.
func run(world *mpi.Comm, P, Q int) error {
	if world.Size() != P*Q {
		return fmt.Errorf("the mesh is %d x %d: run it on %d processes, not %d", P, Q, P*Q, world.Size())
	}
	p, err := mpi1.New(world)
	if err != nil {
		return err
	}
	defer p.Free()
	pid := p.GETID(p.ALL())
	myRow, myCol := pid/Q, pid%Q

	// Figure 1.
	rowGrp := p.PARTG(p.ALL(), myRow)
	colGrp := p.PARTG(p.ALL(), myCol)
	if rowGrp < 0 || colGrp < 0 {
		return failure(p, "PARTG")
	}
	// The field at this process's grid point.
	sample := float64(myRow*Q+myCol) + 1

	// Figure 2.
	if p.PUSHG(rowGrp) < 0 {
		return failure(p, "PUSHG(ROWGRP)")
	}
	rowID := p.GETID(p.ALL())
	coeff, err := fourier(p, sample) // "do 1D FFTs over longitude"
	if err != nil {
		return err
	}
	if p.POPG() < 0 {
		return failure(p, "POPG")
	}
	if p.PUSHG(colGrp) < 0 {
		return failure(p, "PUSHG(COLGRP)")
	}
	colID := p.GETID(p.ALL())
	total, err := weightedSum(p, coeff) // "do summation over latitude"
	if err != nil {
		return err
	}
	if p.POPG() < 0 {
		return failure(p, "POPG")
	}

	fmt.Printf("PID %d: GCPID %d of the row group, %d of the column group\n", pid, rowID, colID)
	if myRow == 0 {
		fmt.Printf("wavenumber %d: spectral coefficient %.4f\n", myCol, total)
	}
	if p.FREEG(rowGrp) < 0 || p.FREEG(colGrp) < 0 {
		return failure(p, "FREEG")
	}
	return nil
}

// fourier is a parallel Fourier transform for processes 0..n-1 of ALL,
// process j holding sample j: each sends its sample to all the others
// and returns the real part of coefficient k = its own number.
func fourier(p *mpi1.Proc, sample float64) (float64, error) {
	n := p.INFOG(p.ALL(), 0, nil)
	me := p.GETID(p.ALL())
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], math.Float64bits(sample))
	ids := make([]int, 0, n)
	for j := range n {
		if j != me {
			id := p.CSEND(mpi1.Nonblocking, buf[:], j, typeSample, 8)
			if id < 0 {
				return 0, failure(p, "CSEND")
			}
			ids = append(ids, id)
		}
	}
	samples := make([]float64, n)
	samples[me] = sample
	var in [8]byte
	for range n - 1 {
		if p.CRECV(mpi1.Blocking, in[:], -1, typeSample, 8) != 8 {
			return 0, failure(p, "CRECV")
		}
		samples[p.INFOS()] = math.Float64frombits(binary.LittleEndian.Uint64(in[:]))
	}
	for _, id := range ids {
		if p.WAIT(id) < 0 {
			return 0, failure(p, "WAIT")
		}
	}
	var re float64
	for j, x := range samples {
		re += x * math.Cos(2*math.Pi*float64(j*me)/float64(n))
	}
	return re, nil
}

// weightedSum is a parallel weighted sum for processes 0..n-1 of ALL,
// weight i+1 for process i: process 0 gathers and returns it; the others
// return 0.
func weightedSum(p *mpi1.Proc, x float64) (float64, error) {
	me := p.GETID(p.ALL())
	var buf [8]byte
	if me != 0 {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(x))
		if p.CSEND(mpi1.Synchronized, buf[:], 0, typeCoeff, 8) != 8 {
			return 0, failure(p, "CSEND")
		}
		return 0, nil
	}
	n := p.INFOG(p.ALL(), 0, nil)
	sum := x
	for range n - 1 {
		if p.CRECV(mpi1.Synchronized, buf[:], -1, typeCoeff, 8) != 8 {
			return 0, failure(p, "CRECV")
		}
		sum += float64(p.INFOS()+1) * math.Float64frombits(binary.LittleEndian.Uint64(buf[:]))
	}
	return sum, nil
}

// failure is the error of a routine of p that returned -1.
func failure(p *mpi1.Proc, routine string) error {
	return errors.New(routine + ": " + mpi1.ETEXT(p.ERROR()))
}
