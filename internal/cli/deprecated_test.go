package cli

import (
	"flag"
	"strings"
	"testing"
)

func TestDeprecatedAliasWarnsAndForwards(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var dst string
	fs.StringVar(&dst, "token-file", "", "new name")
	var stderr strings.Builder
	AddDeprecatedAlias(fs, "out-file", "token-file", &stderr)
	if err := fs.Parse([]string{"--out-file", "/tmp/x"}); err != nil {
		t.Fatal(err)
	}
	if dst != "/tmp/x" {
		t.Errorf("value %q, want it forwarded to --token-file", dst)
	}
	if !strings.Contains(stderr.String(), "warning: --out-file is deprecated") || !strings.Contains(stderr.String(), "use --token-file") {
		t.Errorf("stderr %q", stderr.String())
	}
	stderr.Reset()
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.StringVar(&dst, "token-file", "", "new name")
	AddDeprecatedAlias(fs2, "out-file", "token-file", &stderr)
	if err := fs2.Parse([]string{"--token-file", "/tmp/y"}); err != nil || stderr.Len() != 0 {
		t.Errorf("the new name warned: %q %v", stderr.String(), err)
	}
}
