// Package readme holds tests that keep the documents true where their
// content lives: each binary's flag table (every flag, with its default,
// in the binary's own page), docs/spec.md (every reason and result code of
// the Go code in its tables and no other; every citation of a spec anchor
// resolves), the README's short contract table and supported versions,
// docs/architecture.md (every file and function it names exists; its
// layout covers every folder, its dependency table every direct
// requirement of go.mod), docs/README.md (it indexes every page) and the
// links and anchors of every document.
package readme
