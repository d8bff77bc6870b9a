package mpit

// Bind is the type of MPI object a variable must be bound to before it is
// used (the seed's Table 14.2), or BindNoObject for a variable that
// applies to the whole process.
type Bind int

// Object types.
const (
	BindNoObject   Bind = iota // MPI_T_BIND_NO_OBJECT: applies to the whole process
	BindComm                   // MPI_T_BIND_MPI_COMM: communicators
	BindDatatype               // MPI_T_BIND_MPI_DATATYPE: datatypes
	BindErrhandler             // MPI_T_BIND_MPI_ERRHANDLER: error handlers
	BindFile                   // MPI_T_BIND_MPI_FILE: file handles
	BindGroup                  // MPI_T_BIND_MPI_GROUP: groups
	BindOp                     // MPI_T_BIND_MPI_OP: reduction operators
	BindRequest                // MPI_T_BIND_MPI_REQUEST: requests
	BindWin                    // MPI_T_BIND_MPI_WIN: one-sided windows
	BindMessage                // MPI_T_BIND_MPI_MESSAGE: matched messages
	BindInfo                   // MPI_T_BIND_MPI_INFO: info objects
)

var bindNames = [...]string{"no_object", "comm", "datatype", "errhandler", "file",
	"group", "op", "request", "win", "message", "info"}

func (b Bind) String() string { return enumString("Bind", bindNames[:], b) }

// Object is an MPI object a variable can be bound to: a communicator, a
// window, a request. The mpi package's objects satisfy it by naming their
// type; mpi need not import mpit to do so.
//
// The cvar and pvar registries record no binding, so every variable they
// hold reports BindNoObject and the object passed to a handle allocation is
// ignored, as MPI_T ignores obj_handle for such variables; Object is the
// form a binding will take when a registry records one.
type Object interface {
	// MPITBind returns the object's type; never BindNoObject.
	MPITBind() Bind
}
