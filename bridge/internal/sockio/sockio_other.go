//go:build !linux

package sockio

import "syscall"

// Raw says the functions make raw system calls on this platform; where
// false, Read goes through the runtime and Write2 is not available.
const Raw = false

// Read is one read(2) of fd into p through the runtime.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	if errno, ok := err.(syscall.Errno); ok && errno != 0 {
		return 0, errno
	}
	return n, 0
}

// Write2 is not available: callers check Raw and write with net.Conn.
func Write2(fd uintptr, a, b []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
