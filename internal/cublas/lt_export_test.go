package cublas

// LtRowMajorRef is ltRowMajorRef (lt_test.go) for the GPU tests of package
// cublas_test: the row-major meaning of each epilogue that the mapping test
// checks against a model of cuBLASLt, computed on the host.
var LtRowMajorRef = ltRowMajorRef

// LtSize is ltSize, for the external GPU tests.
var LtSize = ltSize
