package logging

import (
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	tests := []struct {
		level     string
		wantDebug bool
		wantInfo  bool
		wantWarn  bool
	}{
		{"debug", true, true, true},
		{"info", false, true, true},
		{"WARN", false, false, true},
		{"error", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var b strings.Builder
			log, err := New(&b, "json", tt.level)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d-line")
			log.Info("i-line")
			log.Warn("w-line")
			out := b.String()
			for _, c := range []struct {
				msg  string
				want bool
			}{{"d-line", tt.wantDebug}, {"i-line", tt.wantInfo}, {"w-line", tt.wantWarn}} {
				if strings.Contains(out, c.msg) != c.want {
					t.Errorf("%s logged = %v, want %v:\n%s", c.msg, !c.want, c.want, out)
				}
			}
		})
	}
}

func TestBadValuesNameTheFlag(t *testing.T) {
	if _, err := New(&strings.Builder{}, "xml", "info"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("bad format: %v", err)
	}
	if _, err := New(&strings.Builder{}, "json", "verbose"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: %v", err)
	}
}
