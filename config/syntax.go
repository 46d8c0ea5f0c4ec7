package config

import "github.com/sluicehq/sluice/internal/strictyaml"

// SyntaxError turns an error of gopkg.in/yaml.v3 decoding data, the
// contents of file, into an *Error with the line at fault, for other
// YAML formats of the project (such as the proxy's) to report as this
// package does.
func SyntaxError(file string, data []byte, err error) *Error {
	return strictyaml.SyntaxError(file, data, err)
}
