package mpit

// Datatype is the MPI datatype a variable's value is represented by
// (MPI-3.1's Table 14.3), and with it the Go type that reads and writes carry:
//
//	TypeInt                      int     (also enumerations and booleans, 0 or 1)
//	TypeCount                    int64
//	TypeUnsigned, TypeUnsignedLong,
//	TypeUnsignedLongLong         uint64
//	TypeDouble                   float64
//	TypeChar                     string
//
// Go has no fixed-size C types to mirror, so the Go types are 64 bits wide
// except int, which is also 64 bits on the platforms Tachyon runs on.
type Datatype int

// Datatypes.
const (
	TypeInt              Datatype = iota // MPI_INT
	TypeUnsigned                         // MPI_UNSIGNED
	TypeUnsignedLong                     // MPI_UNSIGNED_LONG
	TypeUnsignedLongLong                 // MPI_UNSIGNED_LONG_LONG
	TypeCount                            // MPI_COUNT
	TypeChar                             // MPI_CHAR
	TypeDouble                           // MPI_DOUBLE
)

var datatypeNames = [...]string{"MPI_INT", "MPI_UNSIGNED", "MPI_UNSIGNED_LONG",
	"MPI_UNSIGNED_LONG_LONG", "MPI_COUNT", "MPI_CHAR", "MPI_DOUBLE"}

func (d Datatype) String() string { return enumString("Datatype", datatypeNames[:], d) }
