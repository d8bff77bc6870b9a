//go:build !race

#include "textflag.h"

// Under x86-TSO a plain store is a release; the call into assembly keeps
// the Go compiler from moving memory operations across it. (Loads need no
// assembly: sync/atomic's load is already a plain load here, see load.go.)

// func StoreRelease32(addr *uint32, v uint32)
TEXT ·StoreRelease32(SB), NOSPLIT|NOFRAME, $0-12
	MOVQ addr+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET

// func StoreRelease64(addr *uint64, v uint64)
TEXT ·StoreRelease64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ addr+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func StoreRelease64PairPrefetchW(a *uint64, va uint64, b *uint64, vb uint64, next unsafe.Pointer)
TEXT ·StoreRelease64PairPrefetchW(SB), NOSPLIT|NOFRAME, $0-40
	MOVQ a+0(FP), AX
	MOVQ va+8(FP), BX
	MOVQ b+16(FP), CX
	MOVQ vb+24(FP), DX
	MOVQ BX, (AX)
	MOVQ DX, (CX)
	MOVQ next+32(FP), AX
	TESTQ AX, AX
	JZ   done
	// PREFETCHW (AX), as in PrefetchW.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
done:
	RET

// func Fence()
TEXT ·Fence(SB), NOSPLIT|NOFRAME, $0-0
	LOCK
	ORQ $0, (SP)
	RET
