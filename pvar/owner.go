package pvar

import (
	"strconv"
	"sync"
)

// Bind is the type of object a variable's value is kept for: the whole
// process, or one MPI object of a type (MPI-3.1's Table 14.2, in its
// order), so that a tool reads a bound variable for one object at a time.
type Bind int

// Object types a variable can be bound to.
const (
	BindNoObject   Bind = iota // the whole process
	BindComm                   // a communicator: its rank's endpoint, or the communicator itself
	BindDatatype               // a datatype
	BindErrhandler             // an error handler
	BindFile                   // a file handle
	BindGroup                  // a group
	BindOp                     // a reduction operator
	BindRequest                // a request
	BindWin                    // a one-sided window
	BindMessage                // a matched message
	BindInfo                   // an info object
)

// WithBind records that the variable is bound to objects of type b: what
// the MPI tool interface reports as its bind type, and the type of the Key
// a tool passes to ReadAt.
func WithBind(b Bind) Option { return func(v *Var) { v.bind = b } }

// Owner is the writer of a set of shards: one rank's endpoint and the
// progress engine that polls it. A shard taken with an owner (ShardOf) is
// counted in the process-wide value, like any shard, and also in the
// owner's own value (ReadAt with a Key naming the owner), which is how the
// ranks of one process (a world of goroutine ranks) are told apart. An
// Owner keeps what its closed shards counted, so a rank's value survives
// the rank's end for as long as something holds the Owner.
type Owner struct {
	mu      sync.Mutex
	retired map[*Var]int64 // closed shards: counts summed, watermarks' maxima
	labels  []Label        // under labeled.mu (label.go); replaced whole, never changed in place
}

// NewOwner returns a new owner, distinct from every other.
func NewOwner() *Owner { return &Owner{} }

// retire folds x into the owner's retired value of v: added for a counter,
// the larger kept for a watermark.
func (o *Owner) retire(v *Var, x int64, isMax bool) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.retired == nil {
		o.retired = make(map[*Var]int64)
	}
	if isMax {
		o.retired[v] = max(o.retired[v], x)
	} else {
		o.retired[v] += x
	}
}

// retiredOf returns the owner's retired value of v.
func (o *Owner) retiredOf(v *Var) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retired[v]
}

// Key names what a read of a bound variable is for (ReadAt): the rank that
// reads it (Owner) and, for a communicator, the communicator's matching
// contexts, Context to Context+Contexts-1. The zero Key names the whole
// process.
type Key struct {
	Owner    *Owner
	Context  uint32
	Contexts uint32
}

// HasContext reports whether ctx is one of the key's contexts.
func (k Key) HasContext(ctx uint32) bool { return ctx-k.Context < k.Contexts }

var bindNames = [...]string{"no_object", "comm", "datatype", "errhandler", "file",
	"group", "op", "request", "win", "message", "info"}

func (b Bind) String() string {
	if b < 0 || int(b) >= len(bindNames) {
		return "Bind(" + strconv.Itoa(int(b)) + ")"
	}
	return bindNames[b]
}
