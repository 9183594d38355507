// A minimal net/http server for measuring load tools: bench/engine_vs_wrk.py pins it to
// one core and loads it with each tool. It counts the requests it answers so a tool's
// CPU time can be divided by what the server really served.
//
//	/hello            "Hello, World!"
//	/delay?ms=N       the same after N ms
//	/_count           requests answered since the last /_count (not counted itself)
//	/_resumed         of the requests answered since the last /_resumed, those that came
//	                  on a TLS connection whose handshake resumed a session
//
// Usage: target PORT [CERT KEY [OPTION...]]; with a certificate and key it serves HTTPS
// (HTTP/1.1 and HTTP/2 by ALPN: the load tools offer HTTP/1.1 only). Options:
//
//	tls12             TLS 1.2 at most (default: 1.3 when the client offers it)
//	tickets           issue session tickets, so clients can resume (default: none, so
//	                  every handshake is a full one whatever the client does: wrk, for
//	                  one, offers its last session on every reconnect)
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

var served, resumed atomic.Int64

func hello(w http.ResponseWriter, r *http.Request) {
	served.Add(1)
	if r.TLS != nil && r.TLS.DidResume {
		resumed.Add(1)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("Hello, World!"))
}

func delay(w http.ResponseWriter, r *http.Request) {
	ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
	time.Sleep(time.Duration(ms) * time.Millisecond)
	hello(w, r)
}

func count(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "%d", served.Swap(0))
}

func countResumed(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "%d", resumed.Swap(0))
}

func main() {
	http.HandleFunc("/hello", hello)
	http.HandleFunc("/delay", delay)
	http.HandleFunc("/_count", count)
	http.HandleFunc("/_resumed", countResumed)
	addr := "127.0.0.1:" + os.Args[1]
	var err error
	if len(os.Args) > 3 {
		config := &tls.Config{SessionTicketsDisabled: true}
		for _, opt := range os.Args[4:] {
			switch opt {
			case "tls12":
				config.MaxVersion = tls.VersionTLS12
			case "tickets":
				config.SessionTicketsDisabled = false
			default:
				fmt.Fprintln(os.Stderr, "unknown option:", opt)
				os.Exit(2)
			}
		}
		// no "TLS handshake error" lines: every tool ends its run with handshakes under
		// way, and the lines would land in the middle of the bench's output
		server := &http.Server{Addr: addr, TLSConfig: config, ErrorLog: log.New(io.Discard, "", 0)}
		err = server.ListenAndServeTLS(os.Args[2], os.Args[3])
	} else {
		err = http.ListenAndServe(addr, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
