package relaytoken

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		var out strings.Builder
		if err := Command(context.Background(), []string{arg}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "wirekube-relay-token dev (go") {
			t.Fatalf("%s: stdout %q", arg, out.String())
		}
	}
}
