package train

import "golang.org/x/sys/cpu"

// haveFMA selects the packed AVX2/FMA path of the Go GEMM body.
var haveFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// sgemm6x16 adds six rows of op(A) times sixteen columns of op(B), k values
// long, to the 6×16 block of c: element (r, p) of op(A) at a[r·rsA+p·ksA],
// (p, j) of op(B) at b[p·ksB+j], c's rows ldc apart (all in elements).
// gemm_amd64.s.
//
//go:noescape
func sgemm6x16(k int, a *float32, rsA, ksA int, b *float32, ksB int, c *float32, ldc int)
