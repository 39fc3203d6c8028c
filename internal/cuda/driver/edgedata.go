//go:build linux

package driver

// GraphEdgeData is CUgraphEdgeData: ports and type as unsigned chars, then
// five reserved bytes that must be zero.
type GraphEdgeData struct {
	FromPort uint8
	ToPort   uint8
	Type     uint8
	_        [5]uint8
}
