package helm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// render renders the chart at dir as `helm template RELEASE dir` would,
// with overrides merged over values.yaml, and returns each template's
// output by file name (partials, _*.tpl, excluded; NOTES.txt included,
// though it is not a manifest). It is Go's
// text/template with the Helm functions the chart uses (include, toYaml,
// nindent, indent, quote, default, trunc, trimSuffix, int, add, list,
// fail), .Values, .Release and .Chart; a missing value is an error, which
// Helm would render as empty. It is not Helm: TestChartWithHelm runs the
// real one when it is installed.
func render(dir, release string, overrides map[string]any) (map[string]string, error) {
	var chart struct {
		Name, Version, AppVersion string
	}
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &chart, false); err != nil {
		return nil, err
	}
	values := map[string]any{}
	if err := readYAML(filepath.Join(dir, "values.yaml"), &values, false); err != nil {
		return nil, err
	}
	merge(values, overrides)
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": release, "Namespace": "default", "Service": "Helm"},
		"Chart":   map[string]any{"Name": chart.Name, "Version": chart.Version, "AppVersion": chart.AppVersion},
	}
	paths, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil {
		return nil, err
	}
	root := template.New("chart").Option("missingkey=error")
	root.Funcs(funcs(root))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if _, err := root.New(filepath.Base(p)).Parse(string(b)); err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	for _, p := range paths {
		name := filepath.Base(p)
		if strings.HasPrefix(name, "_") {
			continue
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return nil, err
		}
		out[name] = buf.String()
	}
	return out, nil
}

// readYAML decodes the YAML file at path into v.
func readYAML(path string, v any, strict bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strict {
		return yaml.UnmarshalStrict(b, v)
	}
	return yaml.Unmarshal(b, v)
}

// merge sets over's values into dst, map by map, as Helm's -f does.
func merge(dst, over map[string]any) {
	for k, v := range over {
		sub, ok := v.(map[string]any)
		if d, isMap := dst[k].(map[string]any); ok && isMap {
			d = maps.Clone(d)
			merge(d, sub)
			dst[k] = d
			continue
		}
		dst[k] = v
	}
}

// funcs are the Helm (and Sprig) functions the chart uses, with their meanings.
func funcs(root *template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var buf bytes.Buffer
			err := root.ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote": func(v ...any) string {
			var q []string
			for _, s := range v {
				if s != nil {
					q = append(q, strconv.Quote(fmt.Sprint(s)))
				}
			}
			return strings.Join(q, " ")
		},
		"default": func(d any, given ...any) any {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"int":        toInt,
		"add": func(a ...any) int64 {
			var sum int64
			for _, v := range a {
				sum += int64(toInt(v))
			}
			return sum
		},
		"list": func(v ...any) []any { return v },
		"fail": func(msg string) (string, error) { return "", errors.New("fail: " + msg) },
	}
}

// indent pads every line of s with n spaces.
func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// empty is Sprig's emptiness: nil, zero numbers, false, empty strings and collections.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case int:
		return v == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// toInt converts a value of the chart's to an int, as Sprig's int: 0 when it cannot.
func toInt(v any) int {
	switch v := v.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}
