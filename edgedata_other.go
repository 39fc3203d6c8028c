//go:build !linux

package gpugraph

func (d *Device) cudaAddNodeEdges(g *Graph, n *Node, data []EdgeData) error { panic("unreachable") }
