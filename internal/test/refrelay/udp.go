package refrelay

import (
	"net"
)

// openUDP opens the UDP socket the real relay keeps on its TCP address. It
// returns nil when disabled, when addr is not TCP (a Unix socket), or when
// the bind fails (logged: nothing the fixture forwards depends on UDP).
func (s *Server) openUDP(addr net.Addr) net.PacketConn {
	ta, ok := addr.(*net.TCPAddr)
	if !s.cfg.udp || !ok {
		return nil
	}
	pc, err := net.ListenPacket("udp", ta.String())
	if err != nil {
		s.cfg.log.Warn("udp socket not opened; NAT probes will go unanswered", "addr", ta.String(), "err", err)
		return nil
	}
	return pc
}

// drainUDP reads and drops datagrams until pc is closed. The real relay
// answers NAT probes here; the fixture only counts them.
func (s *Server) drainUDP(pc net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		if _, _, err := pc.ReadFrom(buf); err != nil {
			return
		}
		s.stats.udpPackets.Add(1)
	}
}
