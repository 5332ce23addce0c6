package testutil

import (
	"net"
	"testing"

	"go.uber.org/goleak"
)

// ClosedAddr is a loopback host:port nothing listens on (it was free a
// moment ago): a dial to it is refused at once.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ClientGoLeaks are the goroutines a test binary that talks to a real
// kube-apiserver through client-go leaves behind by design: klog's flusher
// and the idle keep-alive connections of shared HTTP transports. For
// goleak.VerifyTestMain(m, testutil.ClientGoLeaks()...).
func ClientGoLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	}
}
