// Package logging builds the slog logger every binary uses.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Flag defaults shared by every binary.
const (
	DefaultFormat = "json"
	DefaultLevel  = "info"
)

// FormatUsage and LevelUsage are the help texts of --log-format and
// --log-level.
const (
	FormatUsage = "log format: json or text"
	LevelUsage  = "log level: debug, info, warn or error"
)

// CheckFormat returns an error naming --log-format unless format is json
// or text.
func CheckFormat(format string) error {
	if format != "json" && format != "text" {
		return fmt.Errorf("--log-format: want json or text, got %q", format)
	}
	return nil
}

// ParseLevel parses debug, info, warn or error (case-insensitive); the
// error names --log-level.
func ParseLevel(level string) (slog.Level, error) {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", level)
}

// New returns a logger writing format ("json" or "text") at level and above
// to w. Errors name the flag that carried the bad value.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, CheckFormat(format)
	}
}
