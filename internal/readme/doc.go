// Package readme holds a test that keeps README.md's flag tables true: every
// flag of every binary, with its default, must be in the binary's section.
package readme
