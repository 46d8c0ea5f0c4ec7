package page

import "strconv"

// formatRate writes a rate per second with one decimal.
func formatRate(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func formatUint(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
