// A Go net/http server for the engine's HTTP/2 tests (tests/integration/test_h2_engine.py)
// and bench/h2_vs_h2load.py: h2c with prior knowledge on plain TCP (http.Protocols'
// UnencryptedHTTP2, Go 1.24+, no x/net), h2 by ALPN with -tls (a self-signed
// certificate made at start: clients connect with verification off). It counts every
// request it answers, so a test can hold the engine's `sent` against the server's
// count: GET /count answers the count of /hello and /echo requests, POST /reset zeroes
// it. Prints "READY <port>" once it listens.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

var count atomic.Int64

func selfSigned() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func main() {
	useTLS := flag.Bool("tls", false, "h2 over TLS (ALPN) instead of h2c")
	maxStreams := flag.Int("max-streams", 0, "SETTINGS_MAX_CONCURRENT_STREAMS (0: Go's default)")
	h1only := flag.Bool("h1only", false, "HTTP/1.1 alone (ALPN offers no h2)")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Hello, World!")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Write(body)
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.FormatInt(count.Load(), 10))
	})
	mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
		count.Store(0)
	})

	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if *h1only {
		// HTTP/1.1 alone: a client asking for h2 by ALPN finds none
	} else if *useTLS {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{Handler: mux, Protocols: &protocols}
	if *maxStreams > 0 {
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: *maxStreams}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("READY %d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	if *useTLS {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{selfSigned()}}
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	fmt.Fprintln(os.Stderr, err)
}
