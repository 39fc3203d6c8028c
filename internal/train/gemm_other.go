//go:build !amd64

package train

const haveFMA = false

func sgemm6x16(k int, a *float32, rsA, ksA int, b *float32, ksB int, c *float32, ldc int) {
	panic("unreachable")
}
