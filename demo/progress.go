package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// run times fn as the step name, records it in the report and prints its
// start and verdict to progress. Only the first line of an error goes into
// the report (a failed build carries pages of output); the caller gets the
// whole error.
func (r *Report) run(progress io.Writer, name string, fn func() (string, error)) error {
	fmt.Fprintf(progress, "demo: %s ...\n", name)
	start := time.Now()
	detail, err := fn()
	s := Step{Name: name, OK: err == nil, Detail: detail, Took: time.Since(start)}
	if err != nil {
		s.Detail = firstLine(err.Error())
	}
	r.Steps = append(r.Steps, s)
	fmt.Fprintf(progress, "demo: %s %s (%s)\n", mark(s.OK), name, roundDuration(s.Took))
	return err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// prefixWriter indents the harness's progress lines under the demo's.
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) Write(b []byte) (int, error) {
	s := strings.TrimRight(string(b), "\n")
	s = "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
	if _, err := io.WriteString(p.w, s); err != nil {
		return 0, err
	}
	return len(b), nil
}
