//go:build !amd64

package memstore

// rdtsc is never called away from amd64 (tscKernel reports false there);
// it returns 0.
func rdtsc() int64 { return 0 }
