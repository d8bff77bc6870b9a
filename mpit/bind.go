package mpit

import "github.com/tachyon-hpc/tachyon/pvar"

// Bind is the type of MPI object a variable must be bound to before it is
// used (MPI-3.1's Table 14.2), or BindNoObject for a variable that
// applies to the whole process. Its values are pvar's, which records each
// performance variable's (pvar.WithBind).
type Bind = pvar.Bind

// Object types.
const (
	BindNoObject   = pvar.BindNoObject   // MPI_T_BIND_NO_OBJECT: applies to the whole process
	BindComm       = pvar.BindComm       // MPI_T_BIND_MPI_COMM: communicators
	BindDatatype   = pvar.BindDatatype   // MPI_T_BIND_MPI_DATATYPE: datatypes
	BindErrhandler = pvar.BindErrhandler // MPI_T_BIND_MPI_ERRHANDLER: error handlers
	BindFile       = pvar.BindFile       // MPI_T_BIND_MPI_FILE: file handles
	BindGroup      = pvar.BindGroup      // MPI_T_BIND_MPI_GROUP: groups
	BindOp         = pvar.BindOp         // MPI_T_BIND_MPI_OP: reduction operators
	BindRequest    = pvar.BindRequest    // MPI_T_BIND_MPI_REQUEST: requests
	BindWin        = pvar.BindWin        // MPI_T_BIND_MPI_WIN: one-sided windows
	BindMessage    = pvar.BindMessage    // MPI_T_BIND_MPI_MESSAGE: matched messages
	BindInfo       = pvar.BindInfo       // MPI_T_BIND_MPI_INFO: info objects
)

// Object is an MPI object a variable can be bound to (the obj_handle of
// MPI_T_PVAR_HANDLE_ALLOC and MPI_T_CVAR_HANDLE_ALLOC). The mpi package's
// communicators satisfy it (*mpi.Comm) without importing mpit, since both
// methods speak pvar's types; so may any object that names a type and a
// Key.
type Object interface {
	// MPITBind returns the object's type; never BindNoObject.
	MPITBind() Bind
	// MPITKey returns what a bound read is for (pvar.Key: the rank whose
	// values are read, and for a communicator its matching contexts), and
	// false if the object cannot be used: nil, freed, or its rank
	// finalized.
	MPITKey() (pvar.Key, bool)
}

// bindKey checks obj for a handle on a variable bound to objects of type b
// (op names the call) and returns the Key its reads use: the zero Key for
// BindNoObject, whose obj is ignored. A nil object, one of another type or
// one that cannot be used is ErrInvalid.
func bindKey(op, name string, b Bind, obj Object) (pvar.Key, error) {
	if b == BindNoObject {
		return pvar.Key{}, nil
	}
	if obj == nil {
		return pvar.Key{}, errorf(ErrInvalid, op+": "+name+" must be bound to a "+b.String()+", not nil")
	}
	if got := obj.MPITBind(); got != b {
		return pvar.Key{}, errorf(ErrInvalid, op+": "+name+" is bound to a "+b.String()+", not a "+got.String())
	}
	k, ok := obj.MPITKey()
	if !ok || k.Owner == nil {
		return pvar.Key{}, errorf(ErrInvalid, op+": the "+b.String()+" for "+name+" is nil, freed or finalized")
	}
	return k, nil
}
