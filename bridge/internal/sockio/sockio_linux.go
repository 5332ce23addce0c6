package sockio

import (
	"syscall"
	"unsafe"
)

// Raw says the functions make raw system calls on this platform; where
// false they are not available and callers use net.Conn.
const Raw = true

// Read is one read(2) of fd into p: the bytes read (0 at the end of the
// stream) or the errno (EAGAIN: nothing to read yet). p must not be
// empty.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// Write2 is one writev(2) of a then b to fd (either may be empty, not
// both): the bytes written, which may be fewer than offered, or the errno
// (EAGAIN: the socket's buffer is full).
func Write2(fd uintptr, a, b []byte) (int, syscall.Errno) {
	var iov [2]syscall.Iovec
	k := 0
	for _, p := range [2][]byte{a, b} {
		if len(p) > 0 {
			iov[k].Base = unsafe.SliceData(p)
			iov[k].SetLen(len(p))
			k++
		}
	}
	// The call chain down to the system call is nosplit, so iov cannot
	// move off this stack while the kernel reads it.
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
