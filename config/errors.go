package config

import "github.com/sluicehq/sluice/internal/strictyaml"

// Error is a config error: the file, the position in it and what is wrong.
// Its message reads like a compiler's, "file:line:col: config: what", so
// that editors and terminals can jump to it. It has the fields File, Line
// and Column (1-based; 0 when unknown, as for an unreadable file or a
// duplicate domain found only when files are combined), Msg (what is wrong,
// in lower case) and Err (the underlying error, if any, such as a
// sluice.ErrInvalidLimit, safefile.ErrTooLarge or an I/O error).
//
// Every YAML format of the project reports its errors with this one type.
type Error = strictyaml.Error

// suggest returns the candidate closest to s, if it is close enough to be a
// likely typo, else "".
func suggest(s string, candidates []string) string { return strictyaml.Suggest(s, candidates) }
