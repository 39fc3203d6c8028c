package gpugraph

import (
	"errors"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// cudaInstantiateWithParams instantiates g natively with p's flags and
// reports the driver's result and error node in p. Device graph launch on
// the cuda backend instantiates through cuGraphInstantiateWithParams, which
// uploads with InstantiateUpload.
func (d *Device) cudaInstantiateWithParams(opName string, e *Exec, g *Graph, p *InstantiateParams) error {
	var upload backend.Stream
	if p.Flags&InstantiateUpload != 0 {
		upload = p.UploadStream.be
	}
	exec, result, errNode, err := d.cuda.Instantiate(g.cu, uint64(p.Flags), upload)
	e.cu = exec
	err = cudaErr(opName, err)
	p.Result = InstantiateResult(result)
	if errNode != 0 {
		p.ErrNode = g.nodeOfHandle(errNode)
	}
	if err != nil {
		if p.Result == InstantiateSuccess {
			p.Result = InstantiateError
		}
		var e *Error
		if errors.As(err, &e) && p.ErrNode != nil {
			e.Node = p.ErrNode
		}
	}
	return err
}

// nodeOfHandle finds the node of g, or of a graph embedded in it, whose
// native node is h.
func (g *Graph) nodeOfHandle(h uintptr) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.nodes {
		if n.cu == h {
			return n
		}
		if n.child != nil {
			if m := n.child.nodeOfHandle(h); m != nil {
				return m
			}
		}
	}
	return nil
}
