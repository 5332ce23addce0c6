package probe

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	var out strings.Builder
	if err := Command(context.Background(), []string{"--version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "wirekube-relay-probe dev (go") {
		t.Fatalf("stdout %q", out.String())
	}
}
