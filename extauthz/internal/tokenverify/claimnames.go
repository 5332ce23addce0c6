package tokenverify

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxClaimDepth bounds the nesting of a token payload; a ServiceAccount
// token nests three levels (kubernetes.io -> pod -> name).
const maxClaimDepth = 8

// errClaimNames is the refusal of a payload whose claim names are
// ambiguous: encoding/json (and so go-jose) matches struct fields without
// regard to case and lets a repeated name win over the first, so such a
// payload could mean two things to two readers.
var errClaimNames = errors.New("token payload: duplicate or case-variant claim name")

// claimNames are the names of the claims the gateway reads, at any depth.
// A name that folds to one of them must be spelled exactly so: "EXP" is
// not exp, and must not be read as it.
// Read only.
var claimNames = foldedNames("iss", "sub", "aud", "exp", "nbf", "iat", "jti", "kubernetes.io",
	"namespace", "serviceaccount", "pod", "node", "secret", "name", "uid")

func foldedNames(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[foldName(n)] = n
	}
	return m
}

// checkClaimNames reports errClaimNames unless payload is one JSON object
// in which no object, at any depth, holds two names that are equal under
// Unicode simple case folding, and every name that folds to a claim the
// gateway reads is spelled exactly as that claim. Other errors mean the
// payload is not one well-formed JSON value of at most maxClaimDepth
// levels.
func checkClaimNames(payload []byte) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("token payload: not a JSON object")
	}
	if err := checkObject(dec, 1); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("token payload: data after the object")
	}
	return nil
}

// checkObject reads the members of an object whose '{' was read.
func checkObject(dec *json.Decoder, depth int) error {
	seen := map[string]bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return nil
		}
		name, ok := tok.(string)
		if !ok {
			return errors.New("token payload: object name is not a string")
		}
		f := foldName(name)
		if want, known := claimNames[f]; seen[f] || (known && want != name) {
			return errClaimNames
		}
		seen[f] = true
		if err := checkValue(dec, depth); err != nil {
			return err
		}
	}
}

// checkValue reads one value; objects and arrays are walked.
func checkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxClaimDepth {
		return errors.New("token payload: nested too deep")
	}
	if d == '{' {
		return checkObject(dec, depth+1)
	}
	for dec.More() { // '[': ']' is read below
		if err := checkValue(dec, depth+1); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// foldName maps every rune of s to the smallest rune of its simple case
// folding orbit, so two names that encoding/json would match to the same
// field (K, k and the Kelvin sign among them) fold to the same string.
// Invalid UTF-8 maps to U+FFFD, as encoding/json decodes it.
func foldName(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if r == utf8.RuneError {
			sb.WriteRune(r)
			continue
		}
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		sb.WriteRune(low)
	}
	return sb.String()
}
