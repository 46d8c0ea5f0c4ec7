package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// LogHandler returns the slog handler of envoyproxy/ratelimit's LOG_FORMAT
// (serve's -log-format) writing to w with opts: "text" (or empty) is
// slog's text handler; "json" (any case) its JSON handler with
// envoyproxy/ratelimit's keys, @timestamp and @message, and its level
// names (debug, info, warning, error), so that log pipelines built for it
// read Sluice's lines. Any other format is an error.
func LogHandler(format string, w io.Writer, opts *slog.HandlerOptions) (slog.Handler, error) {
	switch strings.ToLower(format) {
	case "", "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		o := slog.HandlerOptions{}
		if opts != nil {
			o = *opts
		}
		next := o.ReplaceAttr
		o.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				a = envoyKeys(a)
			}
			if next != nil {
				a = next(groups, a)
			}
			return a
		}
		return slog.NewJSONHandler(w, &o), nil
	}
	return nil, fmt.Errorf("unknown log format %q: want text or json", format)
}

// envoyKeys renames slog's built-in attributes to envoyproxy/ratelimit's
// (logrus's JSON formatter as it configures it).
func envoyKeys(a slog.Attr) slog.Attr {
	switch a.Key {
	case slog.TimeKey:
		a.Key = "@timestamp"
	case slog.MessageKey:
		a.Key = "@message"
	case slog.LevelKey:
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(logrusLevel(l))
		}
	}
	return a
}

// logrusLevel names l as logrus does: debug, info, warning, error.
func logrusLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warning"
	}
	return "error"
}

// NewLogger returns the logger on stderr of serve and proxy, at the level
// named by -log-level (see ParseLogLevel), in the format of
// envoyproxy/ratelimit's LOG_FORMAT, text (unset) or json (see LogHandler);
// another format is an error, as an unknown level is.
func NewLogger(level string, stderr io.Writer) (*slog.Logger, error) {
	return NewLoggerFormat(level, os.Getenv("LOG_FORMAT"), stderr)
}

// NewLoggerFormat is NewLogger in the given format (serve's -log-format).
func NewLoggerFormat(level, format string, stderr io.Writer) (*slog.Logger, error) {
	l, err := ParseLogLevel(level)
	if err != nil {
		return nil, err
	}
	h, err := LogHandler(format, stderr, &slog.HandlerOptions{Level: l})
	if err != nil {
		return nil, err
	}
	return slog.New(h), nil
}

// ParseLogLevel reads a log level as envoyproxy/ratelimit's LOG_LEVEL
// (logrus's names, any case): trace and debug are slog's Debug, info its
// Info, warn and warning its Warn, error, fatal and panic its Error.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal", "panic":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: want debug, info, warn or error", s)
}
