//go:build !(linux && amd64)

package memstore

// tscKernel reports false: the counter is read only on Linux on amd64,
// where the kernel says whether it keeps time with it.
func tscKernel() bool { return false }
