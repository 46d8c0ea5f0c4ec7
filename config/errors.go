package config

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is a config error: the file, the position in it and what is wrong.
// Its message reads like a compiler's, "file:line:col: config: what", so
// that editors and terminals can jump to it.
type Error struct {
	// File is the file name as given to Parse or found by Load.
	File string
	// Line and Column are 1-based; 0 when unknown (an unreadable file, a
	// duplicate domain found only when files are combined).
	Line, Column int
	// Msg says what is wrong, in lower case.
	Msg string
	// Err is the underlying error, if any, such as a sluice.ErrInvalidLimit
	// or an I/O error.
	Err error
}

// Error returns "file:line:col: config: msg", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteByte(':')
		if e.Column > 0 {
			b.WriteString(strconv.Itoa(e.Column))
			b.WriteByte(':')
		}
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString("config: ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, or nil.
func (e *Error) Unwrap() error { return e.Err }

// yamlLine matches the syntax errors of gopkg.in/yaml.v3, which carry the
// line in their text only.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a yaml.v3 syntax error in data into an *Error with its
// line.
//
// yaml.v3 often reports the line where the enclosing block starts, or the
// line before it, rather than the line at fault. So the line is found
// again: the first line whose addition turns a prefix of data that parses
// into one that does not, by binary search over line boundaries. yaml.v3's
// own line is the fallback.
func yamlError(file string, data []byte, err error) *Error {
	msg := err.Error()
	e := &Error{File: file, Err: err}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if l := firstBadLine(data); l > 0 {
		e.Line = l
	}
	e.Msg = "invalid YAML: " + msg
	return e
}

// firstBadLine returns the 1-based line n such that the first n-1 lines of
// data parse and the first n do not, or 0 if it finds none.
func firstBadLine(data []byte) int {
	var ends []int // ends[i] is the end of line i+1, after its newline
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	if syntaxOK(data) {
		return 0
	}
	// Invariant: the first lo lines parse (0 lines always do), the first
	// hi do not.
	lo, hi := 0, len(ends)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if syntaxOK(data[:ends[mid-1]]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// syntaxOK reports whether every YAML document in data parses.
func syntaxOK(data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return errors.Is(err, io.EOF)
		}
	}
}

// suggest returns the candidate closest to s, if it is close enough to be a
// likely typo, else "".
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := distance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
