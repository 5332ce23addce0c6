// Package logging builds the slog logger every binary uses.
package logging

import (
	"fmt"
	"io"
	"log/slog"
)

// New returns a logger writing format ("json" or "text") to w. The flag name
// is used in the error so a bad value names the flag that carried it.
func New(w io.Writer, format, flagName string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--%s: want json or text, got %q", flagName, format)
	}
}
