// Package readme holds tests that keep the documents true: each binary's
// flag table (every flag, with its default, in the binary's document),
// docs/spec.md (every reason and result code of the Go code in its tables
// and no other; every citation of a spec anchor resolves), the README's
// short contract table and supported versions, and docs/architecture.md (its layout covers every
// folder, its dependency table every direct requirement of go.mod).
package readme
