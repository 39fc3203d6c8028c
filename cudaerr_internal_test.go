package gpugraph

import (
	"errors"
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// TestCudaErr: every cuda call's error passes through cudaErr, success
// included, so it must keep nil nil and give each kind of error its code.
func TestCudaErr(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     error
		want   *Code
		detail string
	}{
		{"success", nil, nil, ""},
		{"driver result", &driver.Result{Code: 400, Name: "CUDA_ERROR_INVALID_HANDLE", Call: "cuStreamQuery"}, ErrInvalidResourceHandle, "cuStreamQuery"},
		{"unknown", &driver.Result{Code: 999, Name: "CUDA_ERROR_UNKNOWN", Call: "cuY"}, ErrUnknown, "cuY"},
		{"unmapped driver result", &driver.Result{Code: 304, Name: "CUDA_ERROR_OPERATING_SYSTEM", Call: "cuX"}, nil, "cuX"},
		{"backend error", backend.Errorf(ErrNotSupported.be(), "no"), ErrNotSupported, "no"},
		{"an *Error", newErr("inner", ErrInvalidValue, "bad"), ErrInvalidValue, "bad"},
		{"anything else", errors.New("boom"), ErrLaunchFailure, "boom"},
	} {
		err := backendErr("Op", c.in)
		if c.in == nil {
			if err != nil {
				t.Errorf("%s: backendErr(nil) = %v", c.name, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Op != "Op" || e.Detail != c.detail {
			t.Errorf("%s: cudaErr = %#v, want an *Error of Op with detail %q", c.name, err, c.detail)
			continue
		}
		if c.want != nil && e.Code != c.want {
			t.Errorf("%s: code %s, want %s", c.name, e.Code.Name(), c.want.Name())
		}
		if c.want == nil && e.Code.Name() != "CUDA_ERROR_OPERATING_SYSTEM" {
			t.Errorf("%s: code %s, want the driver's name", c.name, e.Code.Name())
		}
	}
}

// TestNodeTypesAgree: the backend's node types are the public ones, with
// CUDA's values; lowering converts between them by value.
func TestNodeTypesAgree(t *testing.T) {
	for _, c := range []struct {
		pub NodeType
		be  backend.NodeType
	}{
		{NodeKernel, backend.NodeKernel}, {NodeMemcpy, backend.NodeMemcpy}, {NodeMemset, backend.NodeMemset},
		{NodeHost, backend.NodeHost}, {NodeChildGraph, backend.NodeChildGraph}, {NodeEmpty, backend.NodeEmpty},
		{NodeEventWait, backend.NodeEventWait}, {NodeEventRecord, backend.NodeEventRecord},
		{NodeExtSemasSignal, backend.NodeExtSemSignal}, {NodeExtSemasWait, backend.NodeExtSemWait},
		{NodeMemAlloc, backend.NodeMemAlloc}, {NodeMemFree, backend.NodeMemFree}, {NodeConditional, backend.NodeConditional},
	} {
		if int(c.pub) != int(c.be) {
			t.Errorf("%v is %d here and %d in the backend", c.pub, int(c.pub), int(c.be))
		}
	}
}
