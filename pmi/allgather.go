package pmi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// An allgather over the key-value space, in O(N) gets for the whole job
// where every process reading every other's value would make N²:
//
//  1. Every process Puts its value under KEY-RANK. Barrier.
//  2. Rank 0 Gets the N-1 others, packs all N into a table (each value
//     as its length in decimal, ':' and its bytes), and Puts the table
//     cut into C chunks of the largest value a Put under KEY-all-I takes
//     (vallen_max-1, or less to keep the command within 1024 bytes:
//     MaxValue) under KEY-all-I; chunk 0 starts with "C,". Barrier.
//  3. Every other process Gets chunk 0, then chunks 1 to C-1, and unpacks
//     the table.
//
// That is N-1 gets on rank 0 and C on each other rank: at 32 ranks of
// 60-byte values, 31 + 31·2 instead of 32·31. A rank 0 that cannot
// gather Puts allgatherFailed as chunk 0 before the second Barrier, so
// that the others fail at once rather than wait.

const (
	allgatherSuffix = "-all-"  // KEY-all-I: chunk I of rank 0's table
	allgatherFailed = "!"      // chunk 0 when rank 0 could not gather
	allgatherRoom   = 5 + 10   // the longest suffix a key gets: "-all-" and a chunk number
	minChunk        = 32       // the smallest chunk Allgather works with
	maxTable        = 64 << 20 // the largest table unpacked (64 MiB)
)

// Allgather stores value as this process's under key and returns every
// process's value, in rank order. It is collective: every process of
// the job calls it with the same key, and it contains two Barriers,
// which also publish whatever was Put before it. It makes N-1 Gets on
// rank 0 and a few on every other rank (the table of all values in
// chunks of about vallen_max bytes) rather than N each.
//
// value follows Put's rules; key must leave room for a suffix of 15
// bytes under keylen_max. Keys key-RANK and key-all-I are used; a value
// the table from rank 0 does not give back intact (a chunk missing or
// malformed, this process's own value not the one it put) is an error
// matching ErrProtocol; rank 0's failure to gather, one naming it.
func (c *Client) Allgather(key, value string) ([]string, error) {
	if len(key)+allgatherRoom >= c.keyMax {
		return nil, fmt.Errorf("%w: Allgather: key %q: leave %d bytes of the %d of keylen_max for its suffixes", ErrInvalid, key, allgatherRoom, c.keyMax-1)
	}
	if c.chunkSize(key) < minChunk {
		return nil, fmt.Errorf("%w: Allgather %q: the process manager's vallen_max of %d leaves no room for a table", ErrInvalid, key, c.valMax)
	}
	if err := c.Put(key+"-"+strconv.Itoa(c.rank), value); err != nil {
		return nil, err
	}
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	if c.rank == 0 {
		return c.gatherTable(key, value)
	}
	return c.readTable(key, value)
}

// gatherTable is rank 0's part of Allgather after the first Barrier: it
// gets every value, publishes the table, and enters the second Barrier
// even when it failed, so that the others learn of it.
func (c *Client) gatherTable(key, mine string) ([]string, error) {
	vals := make([]string, c.size)
	vals[0] = mine
	var failed error
	for r := 1; r < c.size && failed == nil; r++ {
		var err error
		if vals[r], err = c.Get(key + "-" + strconv.Itoa(r)); err != nil {
			failed = fmt.Errorf("pmi: Allgather %q: rank %d's value: %w", key, r, err)
		}
	}
	if failed == nil {
		for i, ch := range chunkTable(packTable(vals), c.chunkSize(key)) {
			if err := c.Put(key+allgatherSuffix+strconv.Itoa(i), ch); err != nil {
				failed = fmt.Errorf("pmi: Allgather %q: publishing chunk %d of the table: %w", key, i, err)
				break
			}
		}
	}
	if failed != nil {
		c.Put(key+allgatherSuffix+"0", allgatherFailed) // best effort: the others fail rather than wait
	}
	if err := c.Barrier(); err != nil && failed == nil {
		failed = err
	}
	if failed != nil {
		return nil, failed
	}
	return vals, nil
}

// readTable is every other rank's part of Allgather after the first
// Barrier: it waits for rank 0's table and reads it.
func (c *Client) readTable(key, mine string) ([]string, error) {
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	first, err := c.Get(key + allgatherSuffix + "0")
	if err != nil {
		return nil, fmt.Errorf("pmi: Allgather %q: chunk 0 of rank 0's table: %w", key, err)
	}
	if first == allgatherFailed {
		return nil, fmt.Errorf("%w: Allgather %q: rank 0 could not gather the values (see its error)", ErrRefused, key)
	}
	head, rest, ok := strings.Cut(first, ",")
	chunks, perr := strconv.Atoi(head)
	// No more chunks than a table of maxTable bytes needs.
	if !ok || perr != nil || chunks < 1 || chunks > maxTable/c.chunkSize(key)+1 {
		return nil, fmt.Errorf("%w: Allgather %q: chunk 0 of rank 0's table does not start with a chunk count: %.40q", ErrProtocol, key, first)
	}
	var b strings.Builder
	b.WriteString(rest)
	for i := 1; i < chunks; i++ {
		ch, err := c.Get(key + allgatherSuffix + strconv.Itoa(i))
		if err != nil {
			return nil, fmt.Errorf("pmi: Allgather %q: chunk %d of %d of rank 0's table: %w", key, i, chunks, err)
		}
		b.WriteString(ch)
	}
	vals, err := unpackTable(b.String(), c.size)
	if err != nil {
		return nil, fmt.Errorf("pmi: Allgather %q: rank 0's table of %d chunks: %w", key, chunks, err)
	}
	if vals[c.rank] != mine {
		return nil, fmt.Errorf("%w: Allgather %q: rank 0's table gives this rank (%d) the value %.40q, not the one it put", ErrProtocol, key, c.rank, vals[c.rank])
	}
	return vals, nil
}

// chunkSize is the size of the chunks of Allgather's table under key:
// the largest value a Put under key's longest chunk key takes.
func (c *Client) chunkSize(key string) int {
	return c.MaxValue(key) - allgatherRoom
}

// packTable writes vals as one word: each its length in decimal, ':'
// and its bytes.
func packTable(vals []string) string {
	var b strings.Builder
	for _, v := range vals {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// chunkTable cuts table into the values of the chunks that carry it, of
// at most size bytes each, the first prefixed with the chunk count and
// ','.
func chunkTable(table string, size int) []string {
	n := 1
	for len(table)+len(strconv.Itoa(n))+1 > n*size {
		n++
	}
	out := make([]string, 0, n)
	rest := strconv.Itoa(n) + "," + table
	for len(rest) > size {
		out = append(out, rest[:size])
		rest = rest[size:]
	}
	return append(out, rest)
}

// errTable: a table that is not n values as packTable writes them.
var errTable = errors.New("not a table of length-prefixed values")

// unpackTable reads a table packTable wrote of exactly n values, each a
// word (printable ASCII without spaces or '=') or empty.
func unpackTable(table string, n int) ([]string, error) {
	vals := make([]string, 0, n)
	for pos := 0; pos < len(table); {
		colon := strings.IndexByte(table[pos:], ':')
		if colon < 1 || colon > 10 {
			return nil, fmt.Errorf("%w: %w: no length at byte %d", ErrProtocol, errTable, pos)
		}
		digits := table[pos : pos+colon]
		l, err := strconv.Atoi(digits)
		pos += colon + 1
		if err != nil || l < 0 || l > len(table)-pos || strconv.Itoa(l) != digits { // as packTable writes it: no sign, no leading zero
			return nil, fmt.Errorf("%w: %w: value %d: a length of %q at byte %d, %d bytes left", ErrProtocol, errTable, len(vals), digits, pos, len(table)-pos)
		}
		v := table[pos : pos+l]
		if !isWord(v) {
			return nil, fmt.Errorf("%w: %w: value %d is not printable ASCII without spaces or '='", ErrProtocol, errTable, len(vals))
		}
		if len(vals) == n {
			return nil, fmt.Errorf("%w: %w: more than %d values", ErrProtocol, errTable, n)
		}
		vals = append(vals, v)
		pos += l
	}
	if len(vals) != n {
		return nil, fmt.Errorf("%w: %w: %d values, want %d", ErrProtocol, errTable, len(vals), n)
	}
	return vals, nil
}
