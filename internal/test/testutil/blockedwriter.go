package testutil

import "net/http"

// BlockedWriter is a ResponseWriter whose Write blocks until Released is
// closed, as an HTTP client that stopped reading; Writing is closed when the
// (only) Write begins. Make it with NewBlockedWriter.
type BlockedWriter struct {
	h        http.Header
	Writing  chan struct{}
	Released chan struct{}
}

// NewBlockedWriter returns a BlockedWriter with an empty header.
func NewBlockedWriter() *BlockedWriter {
	return &BlockedWriter{h: http.Header{}, Writing: make(chan struct{}), Released: make(chan struct{})}
}

// Header returns the response header.
func (w *BlockedWriter) Header() http.Header { return w.h }

// WriteHeader ignores the status.
func (w *BlockedWriter) WriteHeader(int) {}

// Write closes Writing and waits for Released.
func (w *BlockedWriter) Write(p []byte) (int, error) {
	close(w.Writing)
	<-w.Released
	return len(p), nil
}
