package train

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	gg "github.com/gpugraph/gpugraph"
)

// Checkpoint is a trained model in one file: its configuration, every
// parameter in ReadParams' layout, and the batch sizes to capture a graph
// for when serving it (Keys; empty: the server's default).
type Checkpoint struct {
	Config Config
	Params []float32
	Keys   []int
}

// checkpointMagic starts every checkpoint file; the version follows it.
const checkpointMagic = "gpugraph-mlp\n"

const checkpointVersion = 1

// maxHeader bounds the JSON header a reader accepts.
const maxHeader = 1 << 20

// NumParams is the number of parameters of a model of this configuration.
func (c Config) NumParams() int {
	in, out := c.dims()
	n := 0
	for l := range in {
		n += out[l]*in[l] + out[l]
	}
	return n
}

// numBiases is the number of biases (every layer's outputs): the bias
// gradients a step with SGD in the GEMMs holds.
func (c Config) numBiases() int {
	_, out := c.dims()
	n := 0
	for _, o := range out {
		n += o
	}
	return n
}

type checkpointHeader struct {
	Config Config `json:"config"`
	Params int    `json:"params"`
	Keys   []int  `json:"keys,omitempty"`
}

func ckErr(format string, args ...any) error {
	return &gg.Error{Op: "train.Checkpoint", Code: gg.ErrInvalidValue, Detail: fmt.Sprintf(format, args...)}
}

// check validates c: its configuration, the number of parameters, and the
// keys (positive, at most once each).
func (c Checkpoint) check() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if len(c.Params) != c.Config.NumParams() {
		return ckErr("%d parameters for a model of %d", len(c.Params), c.Config.NumParams())
	}
	seen := map[int]bool{}
	for _, k := range c.Keys {
		if k < 1 || seen[k] {
			return ckErr("keys %v: want distinct positive batch sizes", c.Keys)
		}
		seen[k] = true
	}
	return nil
}

// WriteTo writes c: the magic line, a version, a length-prefixed JSON header
// (configuration, number of parameters, keys), the parameters as
// little-endian float32, and a CRC-32 (IEEE) of everything before it.
func (c Checkpoint) WriteTo(w io.Writer) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	h, err := json.Marshal(checkpointHeader{Config: c.Config, Params: len(c.Params), Keys: c.Keys})
	if err != nil {
		return 0, err
	}
	var b bytes.Buffer
	b.WriteString(checkpointMagic)
	binary.Write(&b, binary.LittleEndian, uint32(checkpointVersion))
	binary.Write(&b, binary.LittleEndian, uint32(len(h)))
	b.Write(h)
	binary.Write(&b, binary.LittleEndian, c.Params)
	binary.Write(&b, binary.LittleEndian, crc32.ChecksumIEEE(b.Bytes()))
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

// ReadCheckpoint reads a checkpoint written by WriteTo. A file that is not
// one, is cut short, or fails its checksum is refused with an error
// wrapping gpugraph.ErrInvalidValue that says which.
func ReadCheckpoint(r io.Reader) (Checkpoint, error) {
	var c Checkpoint
	crc := crc32.NewIEEE()
	br := io.TeeReader(bufio.NewReader(r), crc)
	full := func(p []byte, what string) error {
		if _, err := io.ReadFull(br, p); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return ckErr("the file ends inside the %s: not a whole checkpoint", what)
			}
			return err
		}
		return nil
	}
	magic := make([]byte, len(checkpointMagic))
	if err := full(magic, "magic"); err != nil {
		return c, err
	}
	if string(magic) != checkpointMagic {
		return c, ckErr("not a gpugraph model checkpoint (it does not start with %q)", checkpointMagic[:len(checkpointMagic)-1])
	}
	var hdr [8]byte
	if err := full(hdr[:], "header"); err != nil {
		return c, err
	}
	if v := binary.LittleEndian.Uint32(hdr[:4]); v != checkpointVersion {
		return c, ckErr("checkpoint version %d: this build reads version %d", v, checkpointVersion)
	}
	hl := binary.LittleEndian.Uint32(hdr[4:])
	if hl > maxHeader {
		return c, ckErr("header of %d bytes (at most %d)", hl, maxHeader)
	}
	hb := make([]byte, hl)
	if err := full(hb, "header"); err != nil {
		return c, err
	}
	var h checkpointHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return c, ckErr("header: %v", err)
	}
	if err := h.Config.Validate(); err != nil {
		return c, err
	}
	if h.Params != h.Config.NumParams() {
		return c, ckErr("%d parameters for a model of %d", h.Params, h.Config.NumParams())
	}
	raw := make([]byte, 4*h.Params)
	if err := full(raw, "parameters"); err != nil {
		return c, err
	}
	sum := crc.Sum32()
	var tail [4]byte
	if err := full(tail[:], "checksum"); err != nil {
		return c, err
	}
	if binary.LittleEndian.Uint32(tail[:]) != sum {
		return c, ckErr("checksum mismatch: the file is damaged")
	}
	c.Config, c.Keys = h.Config, h.Keys
	c.Params = make([]float32, h.Params)
	for i := range c.Params {
		c.Params[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return c, c.check()
}

// SaveCheckpoint writes c to the file path, through a temporary file in the
// same directory renamed over it, so a reader never sees half a file.
func SaveCheckpoint(path string, c Checkpoint) (err error) {
	if err := c.check(); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = c.WriteTo(f); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// LoadCheckpoint reads the checkpoint in the file path.
func LoadCheckpoint(path string) (Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return Checkpoint{}, err
	}
	defer f.Close()
	c, err := ReadCheckpoint(f)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ServeKeys are the batch sizes vLLM captures CUDA graphs for by default,
// up to maxBatch: 1, 2, 4, then multiples of 8 below 256, then multiples
// of 16 up to maxBatch (51 sizes for 512).
func ServeKeys(maxBatch int) []int {
	var k []int
	for _, b := range []int{1, 2, 4} {
		if b <= maxBatch {
			k = append(k, b)
		}
	}
	for b := 8; b < 256 && b <= maxBatch; b += 8 {
		k = append(k, b)
	}
	for b := 256; b <= maxBatch; b += 16 {
		k = append(k, b)
	}
	return k
}
