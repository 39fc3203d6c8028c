//go:build linux && amd64

#include "textflag.h"

// fastcallTrampoline is called by runtime.cgocall on the system stack with
// the C calling convention: DI points to a callArgs {fn, a[12], r1}. It
// calls fn(a[0], ..., a[11]) and stores the result in r1. The frame (64
// bytes, plus the saved BP) keeps SP 16-byte aligned at the CALL.
TEXT fastcallTrampoline<>(SB), NOSPLIT, $64
	MOVQ DI, 56(SP)          // save the struct pointer
	MOVQ DI, R11
	MOVQ 56(R11), R12        // a[6]
	MOVQ R12, 0(SP)
	MOVQ 64(R11), R12        // a[7]
	MOVQ R12, 8(SP)
	MOVQ 72(R11), R12        // a[8]
	MOVQ R12, 16(SP)
	MOVQ 80(R11), R12        // a[9]
	MOVQ R12, 24(SP)
	MOVQ 88(R11), R12        // a[10]
	MOVQ R12, 32(SP)
	MOVQ 96(R11), R12        // a[11]
	MOVQ R12, 40(SP)
	MOVQ 8(R11), DI          // a[0]
	MOVQ 16(R11), SI         // a[1]
	MOVQ 24(R11), DX         // a[2]
	MOVQ 32(R11), CX         // a[3]
	MOVQ 40(R11), R8         // a[4]
	MOVQ 48(R11), R9         // a[5]
	XORL AX, AX              // no vector registers used (varargs convention)
	MOVQ 0(R11), R10         // fn
	CALL R10
	MOVQ 56(SP), DI
	MOVQ AX, 104(DI)         // r1
	RET

// abi0PC returns the address of fastcallTrampoline's ABI0 entry point.
TEXT ·abi0PC(SB), NOSPLIT, $0-8
	LEAQ fastcallTrampoline<>(SB), AX
	MOVQ AX, ret+0(FP)
	RET
