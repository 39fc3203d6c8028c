// Package osthread identifies the calling OS thread, for rules that CUDA
// states per host thread and that gpugraph enforces on goroutines locked to
// one (a user object's destructor may not call the API).
package osthread
