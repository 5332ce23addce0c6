// Package readme holds tests that keep the documents true: README.md's flag
// tables (every flag of every binary, with its default, in the binary's
// section) and docs/spec.md (every reason and result code of the Go code in
// its tables and no other; every citation of a spec anchor resolves).
package readme
