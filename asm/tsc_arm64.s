#include "textflag.h"

// func ReadTSC() uint64
TEXT ·ReadTSC(SB), NOSPLIT|NOFRAME, $0-8
	MRS  CNTVCT_EL0, R0
	MOVD R0, ret+0(FP)
	RET

// func ReadTSCOrdered() uint64
TEXT ·ReadTSCOrdered(SB), NOSPLIT|NOFRAME, $0-8
	ISB  $15
	MRS  CNTVCT_EL0, R0
	MOVD R0, ret+0(FP)
	RET

// func counterFrequency() uint64
TEXT ·counterFrequency(SB), NOSPLIT|NOFRAME, $0-8
	MRS  CNTFRQ_EL0, R0
	MOVD R0, ret+0(FP)
	RET

// func Pause()
TEXT ·Pause(SB), NOSPLIT|NOFRAME, $0-0
	YIELD
	RET
