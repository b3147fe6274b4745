// Package netproxy is a pausable TCP proxy for tests that cut network links
// between servers on loopback, as nats-server's own cluster tests do: each
// route of a cluster goes through a proxy, and pausing the proxies that
// touch a node partitions it from the others; FarClient is an HTTP client
// with the small receive buffer of one far away.
package netproxy

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy forwards every TCP connection accepted on its loopback listener to
// a target address. It is safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	paused bool
	closed bool
	conns  map[*link]struct{}
	wg     sync.WaitGroup
}

// link is one proxied connection pair.
type link struct {
	client, server net.Conn
	once           sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		l.server.Close()
	})
}

// New starts a proxy on 127.0.0.1 (a free port) that forwards to target
// ("host:port").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netproxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		paused, closed := p.paused, p.closed
		p.mu.Unlock()
		if paused || closed {
			// A partitioned link refuses new connections: the dialer sees
			// the connection drop before any protocol byte arrives.
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.dial(c)
	}
}

func (p *Proxy) dial(c net.Conn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	if p.closed || p.paused {
		p.mu.Unlock()
		l.close()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(2)
	go p.pipe(l, c, s)
	go p.pipe(l, s, c)
}

// pipe copies src to dst while the proxy is not paused; while paused, what
// arrives is read and thrown away, so the sender sees a black hole (no
// reset, no back pressure) and has to notice the silence itself, as across
// a real partition.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if !paused {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Pause starts a black hole: bytes on existing connections are dropped and
// new connections are refused.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume heals the link. Connections that lived through the pause lost
// bytes in the middle of their stream, so they are closed; peers reconnect
// through the proxy.
func (p *Proxy) Resume() {
	p.mu.Lock()
	var stale []*link
	if p.paused {
		for l := range p.conns {
			stale = append(stale, l)
		}
	}
	p.paused = false
	p.mu.Unlock()
	for _, l := range stale {
		l.close()
	}
}

// Paused reports whether the proxy is paused.
func (p *Proxy) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Conns is the number of live proxied connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}
