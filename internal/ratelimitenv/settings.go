package ratelimitenv

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/sluicehq/sluice/internal/envflag"
)

// HeadersDefault is sluice serve's -headers default: SLUICE_HEADERS when
// set; else, as envoyproxy/ratelimit answers, "legacy" when
// LIMIT_RESPONSE_HEADERS_ENABLED is true and "off" when it is false (or not
// a boolean, which envflag.Errs refuses before it matters) or when serve
// runs with envoyproxy/ratelimit's deployment variables (Deployment), so
// that swapping its image adds no header its clients did not get before;
// else Sluice's "draft-11" headers.
func HeadersDefault() string {
	if v, ok := os.LookupEnv("SLUICE_HEADERS"); ok {
		return v
	}
	if v, ok := os.LookupEnv("LIMIT_RESPONSE_HEADERS_ENABLED"); ok {
		if b, err := strconv.ParseBool(v); err == nil && b {
			return "legacy"
		}
		return "off"
	}
	if Deployment() {
		return "off"
	}
	return "draft-11"
}

// HeaderNames are the names of the legacy trio of headers (limit,
// remaining, reset). Its fields are those of rlheader.LegacyNames, which
// it converts to; an empty field takes that type's default.
type HeaderNames struct {
	Limit, Remaining, Reset string
}

// LegacyHeaderNames returns the names of -headers legacy's headers from
// envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER; an unset one is "".
func LegacyHeaderNames() HeaderNames {
	return HeaderNames{
		Limit:     os.Getenv("LIMIT_LIMIT_HEADER"),
		Remaining: os.Getenv("LIMIT_REMAINING_HEADER"),
		Reset:     os.Getenv("LIMIT_RESET_HEADER"),
	}
}

// RuntimeConfigDir returns envoyproxy/ratelimit's config directory,
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY (the last "config"
// by default), or "" when RUNTIME_ROOT is unset or empty.
func RuntimeConfigDir() string {
	root := os.Getenv("RUNTIME_ROOT")
	if root == "" {
		return ""
	}
	return filepath.Join(root, os.Getenv("RUNTIME_SUBDIRECTORY"), envflag.String("RUNTIME_APPDIRECTORY", "config"))
}

// RuntimeWatchRoots returns the directories to watch besides those of the
// config itself: when the config is RuntimeConfigDir's (configFlag false,
// configPath that directory) and RUNTIME_WATCH_ROOT is true or unset, as
// envoyproxy/ratelimit defaults it, the parent of RUNTIME_ROOT, so that
// RUNTIME_ROOT being an atomically swapped symlink (envoyproxy/ratelimit's
// "symlink root") triggers a reload; else none. The config directory is
// watched in any case, which is what RUNTIME_WATCH_ROOT=false asks for.
func RuntimeWatchRoots(configFlag bool, configPath string) []string {
	root := os.Getenv("RUNTIME_ROOT")
	if configFlag || root == "" || configPath != RuntimeConfigDir() || !envflag.Bool("RUNTIME_WATCH_ROOT", true) {
		return nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil
	}
	return []string{filepath.Dir(abs)}
}
