package demo

import (
	"os"
	"regexp"
	"testing"
)

// TestReadmeCountsTheAttacks: README's `make demo` row says how many attacks
// the demo tries; it is the number in Attacks().
func TestReadmeCountsTheAttacks(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`tries (\w+) attacks`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README: no \"tries N attacks\" in the make demo row")
	}
	words := map[string]int{"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
	if got, want := words[string(m[1])], len(Attacks()); got != want {
		t.Errorf("README says the demo tries %s attacks, Attacks() has %d", m[1], want)
	}
}
