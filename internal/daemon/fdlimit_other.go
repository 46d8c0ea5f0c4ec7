//go:build !unix

package daemon

// openFileLimit returns 0: the open-file limit is not known here, so the
// listeners have no default connection cap.
func openFileLimit() int64 { return 0 }
