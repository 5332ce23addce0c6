package contractdoc

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var grpcCodeRe = regexp.MustCompile("`([A-Z_]+)` \\((\\d{3})\\)")

// GRPCCodes reads the gRPC status.code docs/spec.md#deny gives each deny
// status ("sets `status.code` to `INVALID_ARGUMENT` (400), ...;"): HTTP
// status to gRPC's canonical upper-case name.
func GRPCCodes(t testing.TB) map[int]string {
	t.Helper()
	out, err := parseGRPCCodes(Spec(t).Text())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseGRPCCodes(text string) (map[int]string, error) {
	text = strings.Join(strings.Fields(text), " ")
	i := strings.Index(text, "sets `status.code` to")
	if i < 0 {
		return nil, errorf("no sentence on status.code")
	}
	sentence, _, _ := strings.Cut(text[i:], ";")
	out := map[int]string{}
	for _, m := range grpcCodeRe.FindAllStringSubmatch(sentence, -1) {
		st, _ := strconv.Atoi(m[2])
		if prev, ok := out[st]; ok && prev != m[1] {
			return nil, errorf("status %d has two gRPC codes, %s and %s", st, prev, m[1])
		}
		out[st] = m[1]
	}
	if len(out) == 0 {
		return nil, errorf("no gRPC codes in the sentence on status.code")
	}
	return out, nil
}
