package gpugraph

import (
	"errors"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
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
	be, err := g.be.Instantiate(uint(p.Flags), upload, e)
	if err == nil {
		e.be = be
		p.Result = InstantiateSuccess
		return nil
	}
	p.Result = InstantiateError
	var ie *cuda.InstantiateError
	if errors.As(err, &ie) {
		p.Result = InstantiateResult(ie.Result)
		if ie.Node != 0 {
			p.ErrNode = g.nodeOfHandle(ie.Node)
		}
		if p.Result == InstantiateSuccess {
			p.Result = InstantiateError
		}
	}
	err = cudaErr(opName, err)
	var ge *Error
	if errors.As(err, &ge) && p.ErrNode != nil {
		ge.Node = p.ErrNode
	}
	return err
}

// nodeOfHandle finds the node of g, or of a graph embedded in it, whose
// backend node is h.
func (g *Graph) nodeOfHandle(h backend.Node) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return findNative(g, h)
}
