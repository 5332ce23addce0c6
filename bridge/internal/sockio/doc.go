// Package sockio is read(2) and writev(2) on a non-blocking socket
// without the Go runtime's blocking-system-call protocol, for use inside
// the callbacks of the socket's syscall.RawConn.
//
// net.Conn's Read and Write enter that protocol on every call
// (entersyscall, exitsyscall): the runtime lets another thread take the
// goroutine's P if the call blocks, and it wakes its monitor thread
// (sysmon) when every P was idle, which then polls every 20 us until the
// program has been idle for a millisecond. A relay that moves bursts
// wakes the monitor on every burst. A read or write of a non-blocking
// socket never blocks: it moves what fits and returns EAGAIN otherwise,
// and the RawConn then waits for readiness in the network poller, so it
// needs none of that bookkeeping. In the bridge behind the shipped nginx
// front, the monitor's wake-ups and sleeps were 16 % of the bridge's CPU
// samples (docs/performance-history.md).
//
// The functions make one system call and report its errno; the caller
// decides what EAGAIN and EINTR mean. They keep no state and allocate
// nothing.
package sockio
