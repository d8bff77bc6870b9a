package mpit

import "github.com/tachyon-hpc/tachyon/cvar"

// Verbosity ranks a variable by audience and detail (MPI-3.1's Table
// 14.1). The values grow in the table's order: VerbosityUserBasic <
// VerbosityUserDetail < ... < VerbosityMPIDevAll.
type Verbosity int

// Verbosity levels.
const (
	VerbosityUserBasic    Verbosity = iota // MPI_T_VERBOSITY_USER_BASIC
	VerbosityUserDetail                    // MPI_T_VERBOSITY_USER_DETAIL
	VerbosityUserAll                       // MPI_T_VERBOSITY_USER_ALL
	VerbosityTunerBasic                    // MPI_T_VERBOSITY_TUNER_BASIC
	VerbosityTunerDetail                   // MPI_T_VERBOSITY_TUNER_DETAIL
	VerbosityTunerAll                      // MPI_T_VERBOSITY_TUNER_ALL
	VerbosityMPIDevBasic                   // MPI_T_VERBOSITY_MPIDEV_BASIC
	VerbosityMPIDevDetail                  // MPI_T_VERBOSITY_MPIDEV_DETAIL
	VerbosityMPIDevAll                     // MPI_T_VERBOSITY_MPIDEV_ALL
)

var verbosityNames = [...]string{"user_basic", "user_detail", "user_all",
	"tuner_basic", "tuner_detail", "tuner_all", "mpidev_basic", "mpidev_detail", "mpidev_all"}

func (v Verbosity) String() string { return enumString("Verbosity", verbosityNames[:], v) }

// cvarVerbosity maps a control variable's verbosity, whose levels are
// MPI_T's in the same order.
func cvarVerbosity(v cvar.Verbosity) Verbosity { return Verbosity(v - cvar.UserBasic) }

// pvarVerbosity is every performance variable's verbosity: the pvar
// registry keeps none, and its variables are kept for tuning.
const pvarVerbosity = VerbosityTunerBasic
