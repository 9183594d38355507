// A minimal net/http server for measuring load tools: bench/engine_vs_wrk.py pins it to
// one core and loads it with each tool. It counts the requests it answers so a tool's
// CPU time can be divided by what the server really served.
//
//	/hello            "Hello, World!"
//	/delay?ms=N       the same after N ms
//	/_count           requests answered since the last /_count (not counted itself)
//
// Usage: target PORT [CERT KEY]; with a certificate and key it serves HTTPS (HTTP/1.1
// and HTTP/2 by ALPN: the load tools offer HTTP/1.1 only).
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

var served atomic.Int64

func hello(w http.ResponseWriter, r *http.Request) {
	served.Add(1)
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

func main() {
	http.HandleFunc("/hello", hello)
	http.HandleFunc("/delay", delay)
	http.HandleFunc("/_count", count)
	addr := "127.0.0.1:" + os.Args[1]
	var err error
	if len(os.Args) > 3 {
		err = http.ListenAndServeTLS(addr, os.Args[2], os.Args[3], nil)
	} else {
		err = http.ListenAndServe(addr, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
