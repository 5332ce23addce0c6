package cli

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestStringList(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"default kept", nil, []string{"d"}},
		{"first use replaces the default", []string{"-l", "a"}, []string{"a"}},
		{"comma-separated and repeated", []string{"-l", "a, b", "-l", "c,,"}, []string{"a", "b", "c"}},
		{"empty value clears", []string{"-l", ""}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list := []string{"d"}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.Var(NewStringList(&list), "l", "a list")
			if err := Parse(fs, tc.args); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(list, tc.want) {
				t.Fatalf("got %q, want %q", list, tc.want)
			}
		})
	}
}

func TestParseRefusesPositionalArguments(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("x", false, "")
	err := Parse(fs, []string{"-x", "stray"})
	if err == nil || !strings.Contains(err.Error(), `"stray"`) {
		t.Fatalf("err = %v, want it to name the stray argument", err)
	}
	if err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-nope"}); err == nil {
		t.Fatal("an unknown flag must fail")
	}
}
