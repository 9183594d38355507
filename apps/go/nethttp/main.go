// Go's net/http server with the same endpoints as every other stack.
//
//	bin/server -addr 127.0.0.1:8080
//	bin/server -addr 127.0.0.1:8443 -http 2 -cert cert.pem -key key.pem   (h2 over TLS, ALPN)
//	bin/server -addr 127.0.0.1:8080 -http h2c                             (h2 prior knowledge)
//
// -http 2 serves TLS and lets net/http offer h2 and http/1.1 by ALPN (its default with
// a certificate); -http h2c serves HTTP/1.1 and cleartext HTTP/2 with prior knowledge on
// one port (http.Protocols, Go 1.24+), no Upgrade dance, as h2load -p h2c speaks it.
//
// /io waits with time.Sleep, which parks only the goroutine, the way a Go handler waits
// for a backend; /db and /dbjson query MariaDB through database/sql (apps/go/dbquery). GOMAXPROCS (set by stacks.toml from `workers`) bounds the cores it uses.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"stackrace/apps/go/dbquery"
)

const (
	ioDefaultMs = 10
	ioMaxMs     = 10000 // a typo in a URL must not park a handler for hours
)

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("Hello, World!"))
}

func jsonHandler(w http.ResponseWriter, r *http.Request) {
	// encoding/json writes compact JSON; the object is put together around the encoded
	// value so every stack sends the contract's exact bytes: {"message": "Hello, World!"}
	value, err := json.Marshal("Hello, World!")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body := make([]byte, 0, 32)
	body = append(body, `{"message": `...)
	body = append(body, value...)
	body = append(body, '}')
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func io(w http.ResponseWriter, r *http.Request) {
	ms := ioDefaultMs
	if v, err := strconv.Atoi(r.URL.Query().Get("ms")); err == nil && v >= 0 {
		ms = min(v, ioMaxMs)
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("ok"))
}

func dbHandler(w http.ResponseWriter, r *http.Request) {
	status, body := dbquery.Response(dbquery.ParseQueries(r.URL.Query().Get("queries")))
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	w.Write(body)
}

func dbJSONHandler(w http.ResponseWriter, r *http.Request) {
	status, body := dbquery.RowResponse()
	if status == http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain")
	}
	w.WriteHeader(status)
	w.Write(body)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	version := flag.Bool("version", false, "print the Go version and exit")
	proto := flag.String("http", "1.1", "1.1, 2 (h2 over TLS: -cert, -key) or h2c")
	cert := flag.String("cert", "", "TLS certificate (PEM), for -http 2")
	key := flag.String("key", "", "TLS key (PEM), for -http 2")
	flag.Parse()
	if *version {
		fmt.Println("net/http", runtime.Version())
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", hello)
	mux.HandleFunc("GET /json", jsonHandler)
	mux.HandleFunc("GET /io", io)
	mux.HandleFunc("GET /db", dbHandler)
	mux.HandleFunc("GET /dbjson", dbJSONHandler)
	server := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	switch *proto {
	case "1.1":
		log.Fatal(server.ListenAndServe())
	case "2":
		if *cert == "" || *key == "" {
			log.Fatal("-http 2 needs -cert and -key")
		}
		log.Fatal(server.ListenAndServeTLS(*cert, *key))
	case "h2c":
		var protocols http.Protocols
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
		server.Protocols = &protocols
		log.Fatal(server.ListenAndServe())
	default:
		log.Fatalf("-http %q: not one of 1.1, 2, h2c", *proto)
	}
}
