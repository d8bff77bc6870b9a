#include "textflag.h"

// func PrefetchW(addr unsafe.Pointer)
TEXT ·PrefetchW(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ addr+0(FP), AX
	// PREFETCHW (AX), 0F 0D /1: the Go assembler has no mnemonic for it.
	// CPUs without it execute the encoding as a NOP.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

// func Prefetch(addr unsafe.Pointer)
TEXT ·Prefetch(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET
