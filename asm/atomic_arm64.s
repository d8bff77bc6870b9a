//go:build !race

#include "textflag.h"

// func StoreRelease32(addr *uint32, v uint32)
TEXT ·StoreRelease32(SB), NOSPLIT|NOFRAME, $0-12
	MOVD  addr+0(FP), R0
	MOVWU v+8(FP), R1
	STLRW R1, (R0)
	RET

// func StoreRelease64(addr *uint64, v uint64)
TEXT ·StoreRelease64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD addr+0(FP), R0
	MOVD v+8(FP), R1
	STLR R1, (R0)
	RET

// func StoreRelease64PairPrefetchW(a *uint64, va uint64, b *uint64, vb uint64, next unsafe.Pointer)
TEXT ·StoreRelease64PairPrefetchW(SB), NOSPLIT|NOFRAME, $0-40
	MOVD a+0(FP), R0
	MOVD va+8(FP), R1
	MOVD b+16(FP), R2
	MOVD vb+24(FP), R3
	MOVD next+32(FP), R4
	STLR R1, (R0)
	STLR R3, (R2)
	CBZ  R4, done
	PRFM (R4), PSTL1KEEP
done:
	RET

// func Fence()
TEXT ·Fence(SB), NOSPLIT|NOFRAME, $0-0
	DMB $0xb
	RET
