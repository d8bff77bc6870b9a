#include "textflag.h"

// func PrefetchW(addr unsafe.Pointer)
TEXT ·PrefetchW(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PSTL1KEEP
	RET

// func Prefetch(addr unsafe.Pointer)
TEXT ·Prefetch(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET
