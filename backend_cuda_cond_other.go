//go:build !linux

package gpugraph

func (d *Device) cudaCondHandle(opName string, g *Graph, def uint32, flags ConditionalFlags) (ConditionalHandle, error) {
	panic("unreachable")
}
