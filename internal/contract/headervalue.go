package contract

import "unicode"

// MaxHeaderValue bounds each identity header value (docs/spec.md#identity-headers);
// real ones are far shorter.
const MaxHeaderValue = 512

// PrintableHeaderValue reports a non-empty value of at most MaxHeaderValue
// bytes of printable characters without spaces, the form of every identity
// header value (names, usernames and timestamps have no spaces).
func PrintableHeaderValue(s string) bool {
	if s == "" || len(s) > MaxHeaderValue {
		return false
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
