package sockio

import (
	"bytes"
	"syscall"
	"testing"
)

// pair is a connected non-blocking Unix stream socket pair.
func pair(t *testing.T) (a, b uintptr) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
	})
	return uintptr(fds[0]), uintptr(fds[1])
}

func TestReadReturnsWhatWasWrittenThenEAGAINThenEOF(t *testing.T) {
	a, b := pair(t)
	buf := make([]byte, 64)
	if n, errno := Read(b, buf); errno != syscall.EAGAIN || n != 0 {
		t.Fatalf("read of an empty socket: %d, %v; want 0, EAGAIN", n, errno)
	}
	if _, err := syscall.Write(int(a), []byte("relay")); err != nil {
		t.Fatal(err)
	}
	n, errno := Read(b, buf)
	if errno != 0 || string(buf[:n]) != "relay" {
		t.Fatalf("read: %q, %v; want \"relay\", no errno", buf[:n], errno)
	}
	if err := syscall.Shutdown(int(a), syscall.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	if n, errno := Read(b, buf); errno != 0 || n != 0 {
		t.Fatalf("read after the peer's shutdown: %d, %v; want 0 (end of stream)", n, errno)
	}
}

func TestReadReportsBadDescriptor(t *testing.T) {
	if _, errno := Read(^uintptr(0), make([]byte, 8)); errno != syscall.EBADF {
		t.Fatalf("read of fd -1: errno %v, want EBADF", errno)
	}
}

func TestWrite2SendsBothPartsInOrder(t *testing.T) {
	a, b := pair(t)
	for _, tc := range []struct{ a, b, want string }{
		{"\x82\x05", "hello", "\x82\x05hello"},
		{"", "only payload", "only payload"},
		{"only header", "", "only header"},
	} {
		n, errno := Write2(a, []byte(tc.a), []byte(tc.b))
		if errno != 0 || n != len(tc.want) {
			t.Fatalf("Write2(%q, %q): %d, %v; want %d, no errno", tc.a, tc.b, n, errno, len(tc.want))
		}
		got := make([]byte, 64)
		m, _ := Read(b, got)
		if string(got[:m]) != tc.want {
			t.Errorf("Write2(%q, %q) delivered %q, want %q", tc.a, tc.b, got[:m], tc.want)
		}
	}
}

// A full socket takes part of a write, then nothing (EAGAIN); what it took
// is the start of the offered bytes.
func TestWrite2StopsAtAFullSocket(t *testing.T) {
	a, b := pair(t)
	if err := syscall.SetsockoptInt(int(a), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	hdr := []byte{0x82, 0x7f, 0, 0, 0, 0, 0, 0x10, 0, 0}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than the socket holds
	n, errno := Write2(a, hdr, payload)
	if errno != 0 || n <= 0 || n >= len(hdr)+len(payload) {
		t.Fatalf("first Write2 of 1 MiB to a 4 KiB socket: %d, %v; want a part, no errno", n, errno)
	}
	if m, errno := Write2(a, hdr, payload); errno != syscall.EAGAIN || m != 0 {
		t.Fatalf("Write2 to the full socket: %d, %v; want 0, EAGAIN", m, errno)
	}
	got := make([]byte, 0, n)
	buf := make([]byte, 1<<16)
	for len(got) < n {
		m, errno := Read(b, buf)
		if errno != 0 {
			t.Fatalf("reading back: %v after %d of %d bytes", errno, len(got), n)
		}
		got = append(got, buf[:m]...)
	}
	want := append(append([]byte{}, hdr...), payload...)[:n]
	if !bytes.Equal(got, want) {
		t.Fatalf("the %d bytes the socket took are not the start of header+payload", n)
	}
}

func TestReadAndWrite2AllocateNothing(t *testing.T) {
	a, b := pair(t)
	hdr, payload, buf := []byte{0x82, 0x40}, make([]byte, 64), make([]byte, 128)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, errno := Write2(a, hdr, payload); errno != 0 {
			t.Fatal(errno)
		}
		if _, errno := Read(b, buf); errno != 0 {
			t.Fatal(errno)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per Write2 and Read, want 0", allocs)
	}
}
