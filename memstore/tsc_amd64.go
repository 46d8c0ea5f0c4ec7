package memstore

// rdtsc returns the CPU's time-stamp counter (RDTSC, not serialized: the
// reading may be taken a few cycles before the instructions around it).
//
//go:noescape
func rdtsc() int64
